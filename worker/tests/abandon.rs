//! Whole steps given up when a page message arrives mid-step (`worker/src/abandon.rs`):
//! the session takes whole batches when the page shares its message counter, a unit during
//! which a message arrives is dropped and taken again, and the run is the uninterrupted
//! run's, bit for bit.

use std::cell::Cell;
use std::rc::Rc;

use serde_json::json;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::Preset;
use tinygpt_tensor::block_on;
use tinygpt_worker::abandon::{Abandon, Abandonable};
use tinygpt_worker::clock::SystemClock;
use tinygpt_worker::protocol::{DatasetInput, EngineKind, RunState};
use tinygpt_worker::session::TrainRequest;
use tinygpt_worker::Session;

type Cpu = Session<Abandonable<CpuBackend>>;

fn shakespeare() -> DatasetInput {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() }
}

/// `tiny` with dropout (its masks depend on the step: a retaken step must draw the same)
/// at batch 64: three row parts without a counter, one whole step with one.
fn request() -> TrainRequest {
    let training = json!({"max_steps": 6, "batch_size": 64, "eval_interval": 3, "eval_batches": 2,
                          "learning_rate": 3e-3, "warmup_steps": 2});
    let mut model = Preset::by_name("tiny").unwrap().model;
    model.dropout = 0.1;
    TrainRequest { preset: Some("tiny".into()), model_config: Some(model), training_config: Some(training) }
}

/// The page's side of the counter: a message "arrives" at the `arrive_at`-th look at the
/// counter (the session looks before each unit, the backend before each op) and waits
/// until the test handles it.
#[derive(Default)]
struct Page {
    looks: Cell<u64>,
    arrive_at: Cell<Option<u64>>,
    waiting: Cell<bool>,
}

impl Page {
    fn look(&self) -> bool {
        self.looks.set(self.looks.get() + 1);
        if self.arrive_at.get().is_some_and(|n| self.looks.get() >= n) {
            self.waiting.set(true);
        }
        self.waiting.get()
    }

    /// A message arrives `after` looks from now.
    fn post_after(&self, after: u64) {
        self.arrive_at.set(Some(self.looks.get() + after));
    }

    /// The worker handles the message.
    fn handled(&self) {
        self.arrive_at.set(None);
        self.waiting.set(false);
    }
}

fn session(page: &Rc<Page>) -> Cpu {
    let page = Rc::clone(page);
    session_with(Abandon::new(move || page.look()))
}

fn session_with(abandon: Abandon) -> Cpu {
    Session::abandonable(CpuBackend::new(1), EngineKind::Wasm, Rc::new(abandon))
}

fn weights(s: &Cpu) -> Vec<u32> {
    let state = block_on(s.run().unwrap().trainer().resume_state()).unwrap();
    state.weights.iter().chain(&state.adam_m).chain(&state.adam_v).map(|x| x.to_bits()).collect()
}

fn losses(s: &Cpu) -> Vec<(usize, u32, Option<u32>)> {
    let history = s.run().unwrap().trainer().history();
    history.iter().map(|p| (p.step, p.train_loss.to_bits(), p.val_loss.map(f32::to_bits))).collect()
}

#[test]
fn whole_steps_given_up_mid_step_and_taken_again_train_the_uninterrupted_run() {
    let clock = SystemClock::default();
    let (quiet_page, page) = (Rc::new(Page::default()), Rc::new(Page::default()));
    let (mut quiet, mut s) = (session(&quiet_page), session(&page));
    assert!(s.abandons_units());
    for x in [&mut quiet, &mut s] {
        x.start(request(), shakespeare(), 0.0).unwrap();
        assert_eq!(x.run().unwrap().rows_per_part(), 64, "a whole batch a unit (parts.rs: unit_rows)");
    }
    while quiet.tick(0.0, &clock).unwrap().busy {}

    // A message arrives at different points of the units (training steps and validation
    // batches alike): each such unit is given up, the message handled, and the run goes on.
    let mut given_up = 0;
    for after in [2, 9, 40, 90, 150, 230, 5, 60].into_iter().cycle().take(200) {
        if !s.is_busy() {
            break;
        }
        let before = (s.run().unwrap().step(), losses(&s).len());
        page.post_after(after);
        let outcome = s.tick(0.0, &clock).unwrap();
        assert!(outcome.busy);
        if page.waiting.get() {
            if (s.run().unwrap().step(), losses(&s).len()) == before {
                given_up += 1;
                assert_eq!(s.run().unwrap().trainer().rows_done(), 0, "nothing of a given-up step stays");
            }
            // The message: a pause and a resume, answered at once.
            page.handled();
            s.pause().unwrap();
            assert_eq!(s.run().unwrap().state, RunState::Paused);
            s.resume(0.0).unwrap();
        }
        page.handled();
        // Then a tick that nothing interrupts.
        s.tick(0.0, &clock).unwrap();
    }
    assert!(!s.is_busy(), "the run finished");
    assert!(given_up >= 4, "units given up: {given_up}");
    assert_eq!(losses(&s), losses(&quiet), "the same training and validation losses, bit for bit");
    assert_eq!(losses(&s).len(), 6);
    assert_eq!(weights(&s), weights(&quiet), "the same weights and AdamW moments, bit for bit");
}

#[test]
fn a_message_waiting_before_a_tick_is_answered_before_any_work() {
    let clock = SystemClock::default();
    let page = Rc::new(Page::default());
    let mut s = session(&page);
    s.start(request(), shakespeare(), 0.0).unwrap();
    page.post_after(0);
    let outcome = s.tick(50.0, &clock).unwrap();
    assert!(outcome.busy && outcome.messages.is_empty());
    assert_eq!((s.run().unwrap().step(), s.run().unwrap().trainer().rows_done()), (0, 0));
    page.handled();
    s.tick(0.0, &clock).unwrap();
    assert_eq!(s.run().unwrap().step(), 1);
}

/// The worker gives steps up only between ops, so every run it installs (`Session::install`)
/// takes a large vocabulary's head in chunks (`tinygpt_model::head_loss`); a model on its own
/// takes it whole.
#[test]
fn the_worker_cuts_the_head_into_chunks() {
    let page = Rc::new(Page::default());
    let mut s = session(&page);
    s.start(request(), shakespeare(), 0.0).unwrap();
    let model = s.run().unwrap().trainer().model();
    assert_eq!(model.head_chunk_budget(), Some(tinygpt_model::head_loss::CHUNK_MULTIPLY_ADDS));
    let alone = tinygpt_model::Gpt::new(model.config().clone(), model.params().clone()).unwrap();
    assert_eq!(alone.head_chunk_budget(), None);
}

#[test]
fn without_a_counter_steps_are_taken_in_row_parts() {
    let s = Session::abandonable(CpuBackend::new(1), EngineKind::Wasm, Rc::new(Abandon::never()));
    assert!(!s.abandons_units());
    let mut s = s;
    s.start(request(), shakespeare(), 0.0).unwrap();
    assert_eq!(s.run().unwrap().rows_per_part(), 22, "tiny at batch 64: 22 + 22 + 20 rows (parts.rs)");
}

#[test]
fn pausing_again_and_again_within_a_step_gives_up_every_unit() {
    // A user pausing and resuming faster than a step ends (a scalar `medium` step is 1.5–2.8
    // s in a tab) is not a page that keeps the run from moving: every pause, and the stop
    // after them, must cut the unit short. Counted as units given up in a row, the fourth
    // ran in full and its pause waited for the whole step.
    let clock = SystemClock::default();
    let page = Rc::new(Page::default());
    let mut s = session(&page);
    s.start(request(), shakespeare(), 0.0).unwrap();
    for pause in 0..2 * tinygpt_worker::abandon::MAX_GIVE_UPS_IN_A_ROW {
        page.post_after(30);
        assert!(s.tick(0.0, &clock).unwrap().busy);
        assert!(page.waiting.get());
        let run = s.run().unwrap();
        assert_eq!((run.step(), run.trainer().rows_done()), (0, 0), "pause {pause}: the step was given up");
        page.handled();
        s.pause().unwrap();
        s.resume(0.0).unwrap();
    }
    page.post_after(30);
    s.tick(0.0, &clock).unwrap();
    assert_eq!(s.run().unwrap().step(), 0, "the stop's unit was given up too");
    page.handled();
    s.stop().unwrap();
    assert_eq!(s.run().unwrap().state, RunState::Stopped);
}

#[test]
fn after_three_units_given_up_only_a_pause_or_stop_cuts_the_next_short() {
    // Messages other than pause and stop (a sample, a save) that keep arriving mid-step
    // would stall the run, so after three units given up the next runs in full for them;
    // a pause or stop still cuts it short where the page counts those apart.
    let clock = SystemClock::default();
    let page = Rc::new(Page::default());
    let command = Rc::new(Cell::new(false));
    let mut s = {
        let (page, command) = (Rc::clone(&page), Rc::clone(&command));
        session_with(Abandon::new(move || page.look()).with_commands(move || command.get()))
    };
    s.start(request(), shakespeare(), 0.0).unwrap();
    let interrupted_tick = |s: &mut Cpu, is_command: bool| {
        page.post_after(30);
        command.set(is_command);
        s.tick(0.0, &clock).unwrap();
        assert!(page.waiting.get());
        page.handled();
        command.set(false);
        s.run().unwrap().step()
    };
    for _ in 0..tinygpt_worker::abandon::MAX_GIVE_UPS_IN_A_ROW {
        assert_eq!(interrupted_tick(&mut s, false), 0, "given up");
    }
    assert_eq!(interrupted_tick(&mut s, false), 1, "the fourth runs in full for another message");
    for _ in 0..tinygpt_worker::abandon::MAX_GIVE_UPS_IN_A_ROW {
        assert_eq!(interrupted_tick(&mut s, false), 1, "given up");
    }
    assert_eq!(interrupted_tick(&mut s, true), 1, "a pause cuts even that one short");
}
