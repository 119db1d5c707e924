//! Command-line flags. Every command takes `--backend`, `--threads` and `--kernels`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tinygpt_tensor::Precision;

use self::values::{count, float, Range, MAX_BATCH, MAX_RANK, MAX_STEPS, MAX_TOKENS, MAX_WINDOWS, VOCAB};

#[derive(Parser, Debug)]
#[command(
    name = "tinygpt",
    version,
    about = "Train and run a tiny byte-level GPT",
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Train a model (on the embedded TinyShakespeare unless --data is given).
    Train(TrainArgs),
    /// Generate text from a trained model, streaming to stdout.
    Sample(SampleArgs),
    /// Print `{train_loss, val_loss, tokens}` over a fixed, seeded set of batches.
    Eval(EvalArgs),
    /// Time training steps and print one JSON line.
    Bench(BenchArgs),
    /// Write a checkpoint as one .safetensors file (ours: weights, moments, JSON metadata;
    /// or nanoGPT's names and layout, for PyTorch).
    Export(ExportArgs),
    /// Turn a .safetensors file (ours, or nanoGPT's) back into a checkpoint folder.
    Import(ImportArgs),
    /// Time generation with and without the key/value cache; one JSON line each.
    BenchGenerate(BenchGenerateArgs),
    /// Write one training step's reference state (batch, logits, loss, every gradient, the
    /// next 10 losses) as a .safetensors file for another implementation to diff against.
    DebugState(DebugStateArgs),
    /// List a run folder's checkpoint generations: step, val loss, size, whether it verifies.
    Checkpoints(CheckpointsArgs),
    /// LoRA adapters on a frozen base: train, merge, list, export, import, logits.
    #[command(subcommand)]
    Lora(LoraCommand),
}

#[derive(Subcommand, Debug)]
pub enum LoraCommand {
    /// Train an adapter on a frozen base (`--base DIR` or `--base builtin`).
    Train(LoraTrainArgs),
    /// Fold an adapter into its base: a plain checkpoint that samples like base + adapter.
    Merge(LoraMergeArgs),
    /// List the adapters stored beside a base (`<base>/adapters/`).
    List(LoraListArgs),
    /// Write an adapter as one .safetensors file, or (--format peft) as the folder Python's
    /// `peft` loads on a Hugging Face GPT-2.
    Export(LoraExportArgs),
    /// Read an adapter (one .safetensors file, or --format peft a folder `peft` saved) into
    /// an adapter folder.
    Import(LoraImportArgs),
    /// Write the logits of base + adapter on a text as a .safetensors file, for comparing
    /// with another implementation (PEFT's, say).
    Logits(LoraLogitsArgs),
}

#[derive(Args, Debug)]
pub struct LoraTrainArgs {
    /// The frozen base: a checkpoint folder, or `builtin` (a medium model trained on TinyShakespeare).
    #[arg(long)]
    pub base: PathBuf,
    /// The UTF-8 text to adapt to.
    #[arg(long)]
    pub data: PathBuf,
    /// `qv-r4` (rank 4, alpha 8, q_proj,v_proj; the default) or `qvo-r8` (rank 8, alpha 16, q_proj,v_proj,o_proj).
    #[arg(long)]
    pub preset: Option<String>,
    /// Adapter rank (default 4).
    #[arg(long, allow_negative_numbers = true, value_parser = count::<usize>(1, MAX_RANK))]
    pub rank: Option<usize>,
    /// Adapter alpha; the term is scaled by alpha/rank (default 2 × rank).
    #[arg(long, allow_negative_numbers = true, value_parser = float::<f32>(Range::Positive))]
    pub alpha: Option<f32>,
    /// Linears to adapt, comma-separated: q_proj,k_proj,v_proj,o_proj,fc_in,fc_out (default q_proj,v_proj).
    #[arg(long)]
    pub targets: Option<String>,
    /// The adapter folder to write (e.g. <base>/adapters/<name>).
    #[arg(long)]
    pub out: PathBuf,
    /// Continue the adapter in --out exactly (to --steps total, default its own max_steps).
    #[arg(long)]
    pub resume: bool,
    /// Train on windows of this many tokens, at most the base's context (default: the base's
    /// context; with --resume, the window the adapter was trained on). Memory grows with the
    /// window: a GPT-2 base's 1,024 needs about four times what 256 does.
    #[arg(long, allow_negative_numbers = true, value_parser = count::<usize>(1, MAX_TOKENS))]
    pub context: Option<usize>,
    /// Steps in all (default 1000).
    #[arg(long, allow_negative_numbers = true, value_parser = count::<i64>(1, MAX_STEPS))]
    pub steps: Option<i64>,
    /// Peak learning rate of the adapter (default 1e-3), cosine to a tenth of it.
    #[arg(long, allow_negative_numbers = true, value_parser = float::<f64>(Range::Positive))]
    pub lr: Option<f64>,
    /// Weight decay on the adapter's tensors (default 0).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_parser = float::<f32>(Range::NonNegative))]
    pub weight_decay: f32,
    /// Evaluate every this many steps (and save, unless --checkpoint-interval says otherwise).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = count::<usize>(1, MAX_STEPS))]
    pub eval_interval: usize,
    /// Save the adapter every this many steps (default: --eval-interval); always at the end.
    #[arg(long, allow_negative_numbers = true, value_parser = count::<usize>(1, MAX_STEPS))]
    pub checkpoint_interval: Option<usize>,
    /// Stop once this many evaluations in a row have not improved on the best validation
    /// loss (default: never), as the page's adapter runs do.
    #[arg(long, allow_negative_numbers = true, value_parser = count::<usize>(1, MAX_STEPS))]
    pub early_stop_patience: Option<usize>,
    /// Batch size (default: the base's).
    #[arg(long, allow_negative_numbers = true, value_parser = count::<usize>(1, MAX_BATCH))]
    pub batch: Option<usize>,
    /// Seed of the adapter's init and the batches (default: the base's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Matrix products: `f32`, or `mixed` (f16 inputs, f32 sums, dynamic loss scaling;
    /// --backend wgpu only). Default f32; with --resume, the adapter run's.
    #[arg(long)]
    pub precision: Option<Precision>,
    /// Also fine-tune the whole base (a copy; every parameter trained) for as many steps on
    /// the same data, batches and schedule, and report its val loss beside the adapter's
    /// (`full_val_loss`): what the adapter leaves on the table. Not with --resume.
    #[arg(long, conflicts_with = "resume")]
    pub compare_full: bool,
    /// The full fine-tuning's peak learning rate (default: the adapter's).
    #[arg(long, requires = "compare_full", allow_negative_numbers = true, value_parser = float::<f64>(Range::Positive))]
    pub full_lr: Option<f64>,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct LoraMergeArgs {
    #[arg(long)]
    pub base: PathBuf,
    /// An adapter folder, or the name of one in <base>/adapters/.
    #[arg(long)]
    pub adapter: PathBuf,
    /// The checkpoint folder to write.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct LoraListArgs {
    #[arg(long)]
    pub base: PathBuf,
}

#[derive(Args, Debug)]
pub struct LoraExportArgs {
    #[arg(long)]
    pub base: PathBuf,
    #[arg(long)]
    pub adapter: PathBuf,
    /// The .safetensors file to write; with --format peft, the folder.
    #[arg(long)]
    pub out: PathBuf,
    /// `tinygpt` (one .safetensors file in our module names) or `peft` (adapter_config.json
    /// + adapter_model.safetensors in GPT-2's names: PeftModel.from_pretrained loads it).
    #[arg(long, value_enum, default_value_t = AdapterFormat::Tinygpt)]
    pub format: AdapterFormat,
    /// --format peft: the config's base_model_name_or_path (default: the base's model_name).
    #[arg(long)]
    pub base_model_name_or_path: Option<String>,
}

/// How `lora export` writes an adapter and `lora import` reads one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AdapterFormat {
    /// One .safetensors file: our module names (blocks.0.attn.q_proj), our config in __metadata__.
    Tinygpt,
    /// PEFT's folder for GPT-2: adapter_config.json + adapter_model.safetensors.
    Peft,
}

#[derive(Args, Debug)]
pub struct LoraImportArgs {
    #[arg(long)]
    pub base: PathBuf,
    /// A .safetensors adapter (from `tinygpt lora export`); with --format peft a folder
    /// (adapter_config.json + adapter_model.safetensors, as `save_pretrained` writes it).
    #[arg(long = "in")]
    pub input: PathBuf,
    /// The adapter folder to create.
    #[arg(long)]
    pub out: PathBuf,
    /// `tinygpt` or `peft` (see `lora export --format`).
    #[arg(long, value_enum, default_value_t = AdapterFormat::Tinygpt)]
    pub format: AdapterFormat,
}

#[derive(Args, Debug)]
pub struct LoraLogitsArgs {
    /// The base: a checkpoint folder, or `builtin`.
    #[arg(long)]
    pub base: PathBuf,
    /// An adapter folder, or the name of one in <base>/adapters/ (default: the base alone).
    #[arg(long)]
    pub adapter: Option<PathBuf>,
    /// The text, read with the base's tokenizer (at most its context length in tokens).
    #[arg(long, required_unless_present = "ids", conflicts_with = "ids")]
    pub text: Option<String>,
    /// Token ids instead of a text, comma-separated (`5,17,300`).
    #[arg(long, value_delimiter = ',')]
    pub ids: Option<Vec<u32>>,
    /// The .safetensors file to write: `ids` (I64 `[T]`) and `logits` (F32 `[T, vocab]`).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// The reference CPU backend (threaded with --threads).
    Cpu,
    /// The GPU through wgpu (Vulkan or Metal; --threads does not apply).
    Wgpu,
    /// The CPU backend with every op's inputs and outputs checked (NaN, infinities,
    /// ranges): names the first op that went wrong. Several times slower.
    #[value(name = "checked", alias = "checked:cpu")]
    Checked,
    /// wgpu with every op checked, as `checked` does for the CPU.
    #[value(name = "checked:wgpu")]
    CheckedWgpu,
}

#[derive(Args, Debug, Clone)]
pub struct Compute {
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    pub backend: BackendKind,
    /// Worker threads, from 1 to 4 × the number of cores (default: all cores).
    #[arg(long, allow_negative_numbers = true)]
    pub threads: Option<i64>,
    /// CPU kernels: `fast` (the best SIMD variant this CPU has: AVX-512, AVX2+FMA) or
    /// `reference` (the scalar kernels every variant is checked against).
    #[arg(long, value_enum, default_value_t = KernelsKind::Fast)]
    pub kernels: KernelsKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelsKind {
    /// The scalar reference kernels.
    Reference,
    /// The fastest kernel variant this CPU supports.
    Fast,
}

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Model size: tiny, small, medium, large, xl, huge (default: small).
    #[arg(long, conflicts_with_all = ["config", "resume"])]
    pub preset: Option<String>,
    /// A JSON file `{"preset"?, "model"?: {...}, "training"?: {...}}`.
    #[arg(long, conflicts_with = "resume")]
    pub config: Option<PathBuf>,
    /// Continue the run checkpointed in this folder, exactly: to its original max_steps,
    /// or for --steps more steps. New checkpoints go to the same folder unless --out is given.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// With --resume: the generation to continue from (`gen-000003`, `3`, or `best`: the
    /// one with the lowest validation loss; default: the latest). `tinygpt checkpoints DIR`
    /// lists them.
    #[arg(long, requires = "resume")]
    pub generation: Option<String>,
    /// Resume even though the data differs from the checkpoint's (a deliberate change of data).
    #[arg(long, requires = "resume", conflicts_with_all = ["preset", "config"])]
    pub force: bool,
    /// Train into an --out folder that already holds another run, deleting that run.
    #[arg(long)]
    pub overwrite: bool,
    /// A UTF-8 text file to train on (default: the embedded TinyShakespeare).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// A new run: the total number of steps (max_steps), over which the cosine schedule
    /// decays. With --resume: this many more steps, on the run's original schedule (past
    /// its max_steps the learning rate stays at min_lr).
    #[arg(long, allow_negative_numbers = true, value_parser = count::<i64>(1, MAX_STEPS))]
    pub steps: Option<i64>,
    /// Peak learning rate. The cosine schedule then ends at lr/10, unless the --config file's
    /// training section names its own min_lr (which is kept).
    #[arg(long, allow_negative_numbers = true, value_parser = float::<f64>(Range::Positive))]
    pub lr: Option<f64>,
    #[arg(long, allow_negative_numbers = true, value_parser = count::<i64>(1, MAX_BATCH))]
    pub batch: Option<i64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// The checkpoint folder (generations of checkpoints; default `out`, or the --resume
    /// folder). One that holds another run is refused unless --overwrite is given.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Matrix products: `f32`, or `mixed` (f16 inputs, f32 sums, dynamic loss scaling;
    /// --backend wgpu only). Default: the --config's, else f32; with --resume, the run's.
    #[arg(long)]
    pub precision: Option<Precision>,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// A checkpoint folder (written by `tinygpt train` or `tinygpt import`), or `builtin`.
    #[arg(long)]
    pub model: PathBuf,
    /// A LoRA adapter on the model: a folder, or a name in <model>/adapters/.
    #[arg(long)]
    pub adapter: Option<PathBuf>,
    /// The generation to load (`gen-000003`, `3`, or `best`: the one with the lowest
    /// validation loss; default: the latest). `tinygpt checkpoints DIR` lists them.
    #[arg(long)]
    pub generation: Option<String>,
    #[arg(long, default_value = "")]
    pub prompt: String,
    #[arg(long, default_value_t = 300, allow_negative_numbers = true, value_parser = count::<usize>(1, MAX_TOKENS))]
    pub tokens: usize,
    /// 0 is greedy.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true, value_parser = float::<f32>(Range::NonNegative))]
    pub temperature: f32,
    /// 0 keeps every token.
    #[arg(long, default_value_t = 40, allow_negative_numbers = true, value_parser = count::<usize>(0, VOCAB))]
    pub top_k: usize,
    /// Nucleus sampling: keep the most likely tokens whose probabilities sum to at least
    /// this (after --top-k); 1 keeps every token.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = float::<f32>(Range::Fraction))]
    pub top_p: f32,
    #[arg(long, default_value_t = 1337)]
    pub seed: u64,
    /// End the sample right after this byte sequence (repeatable; `\n`, `\t`, `\\` and
    /// `\xHH` escapes name any byte).
    #[arg(long)]
    pub stop: Vec<String>,
    /// Run the whole window for every token instead of one position with the key/value
    /// cache (the same text, slower).
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A checkpoint folder, or `builtin`.
    #[arg(long)]
    pub model: PathBuf,
    /// A LoRA adapter on the model: a folder, or a name in <model>/adapters/.
    #[arg(long)]
    pub adapter: Option<PathBuf>,
    /// The generation to load (`gen-000003`, `3`, or `best`: the one with the lowest
    /// validation loss; default: the latest). `tinygpt checkpoints DIR` lists them.
    #[arg(long)]
    pub generation: Option<String>,
    /// Text to evaluate on (default: the embedded TinyShakespeare).
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long, default_value = "small")]
    pub preset: String,
    /// Time the model and batch size of a `train --config` file (dropout included)
    /// instead of `--preset`.
    #[arg(long, conflicts_with = "preset")]
    pub config: Option<PathBuf>,
    /// Timed steps (after warm-up).
    #[arg(long, default_value_t = 10, allow_negative_numbers = true, value_parser = count::<i64>(1, MAX_STEPS))]
    pub steps: i64,
    /// Matrix products: `f32`, or `mixed` (--backend wgpu only). Default: the --config's, else f32.
    #[arg(long)]
    pub precision: Option<Precision>,
    /// Time LoRA steps instead: a fresh adapter of this preset (`qv-r4`, `qvo-r8`) on the
    /// model, which is frozen (random weights: a step's cost does not depend on them).
    #[arg(long)]
    pub lora: Option<String>,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A checkpoint folder.
    #[arg(long)]
    pub model: PathBuf,
    /// The generation to load (`gen-000003`, `3`, or `best`: the one with the lowest
    /// validation loss; default: the latest). `tinygpt checkpoints DIR` lists them.
    #[arg(long)]
    pub generation: Option<String>,
    /// The .safetensors file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Leave out the AdamW moments (a smaller file for sampling; resuming restarts them at zero).
    /// nanoGPT files never hold them.
    #[arg(long)]
    pub weights_only: bool,
    /// `tinygpt` (our names, with the moments and every run document) or `nanogpt`
    /// (nanoGPT's names: q, k, v fused into c_attn, lm_head a copy of wte, its config in
    /// __metadata__; loads into PyTorch, see examples/pytorch).
    #[arg(long, value_enum, default_value_t = FileFormat::Tinygpt)]
    pub format: FileFormat,
}

/// The `.safetensors` naming scheme of `export` and `import`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FileFormat {
    /// Our canonical names, AdamW moments and run documents.
    Tinygpt,
    /// nanoGPT's GPT (karpathy/nanoGPT model.py): weights only.
    Nanogpt,
}

/// What `import` reads: `export`'s two formats, or a Hugging Face GPT-2 folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ImportFormat {
    /// Our canonical names, AdamW moments and run documents.
    Tinygpt,
    /// nanoGPT's GPT (karpathy/nanoGPT model.py): weights only.
    Nanogpt,
    /// A Hugging Face GPT-2 folder: config.json, model.safetensors, vocab.json, merges.txt.
    HfGpt2,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A .safetensors file written by `tinygpt export` (or the web app's download); with
    /// --format nanogpt one in nanoGPT's layout (examples/pytorch/continue.py writes one);
    /// with --format hf-gpt2 a folder (config.json, model.safetensors, vocab.json, merges.txt).
    #[arg(long = "in")]
    pub input: PathBuf,
    /// The checkpoint folder to create or add a generation to.
    #[arg(long)]
    pub out: PathBuf,
    /// The file's naming scheme (see `export --format`), or `hf-gpt2`. A nanoGPT file
    /// without our run documents, and a GPT-2 folder, import as a new run at step 0, tied to
    /// the embedded TinyShakespeare with the default training config (`train --resume
    /// --force --data` changes the data); a GPT-2 folder's tokenizer files go to the run
    /// folder's tokenizer/.
    #[arg(long, value_enum, default_value_t = ImportFormat::Tinygpt)]
    pub format: ImportFormat,
}

#[derive(Args, Debug)]
pub struct BenchGenerateArgs {
    #[arg(long, default_value = "medium")]
    pub preset: String,
    /// Tokens to generate, in context lengths (the window fills and slides this often).
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = count::<i64>(1, MAX_WINDOWS))]
    pub windows: i64,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct DebugStateArgs {
    /// A checkpoint folder.
    #[arg(long)]
    pub model: PathBuf,
    /// The generation to load (`gen-000003`, `3`, or `best`; default: the latest).
    #[arg(long)]
    pub generation: Option<String>,
    /// Text to draw the batch from (default: the embedded TinyShakespeare).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Rows of the batch; each is a window of the model's context length.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = count::<i64>(1, MAX_BATCH))]
    pub batch: i64,
    /// Seeds the batch sampler (`Rng::new(seed)` over the train split).
    #[arg(long, default_value_t = 1337)]
    pub seed: u64,
    /// The .safetensors file to write.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub compute: Compute,
}

#[derive(Args, Debug)]
pub struct CheckpointsArgs {
    /// A checkpoint folder.
    pub dir: PathBuf,
}

/// The flags' value parsers: every count and every float a command takes is checked as clap
/// reads it, so a value out of range (a count that would wrap in a release build, a float
/// that is NaN or infinite) is refused in one line naming the flag and what it allows, by
/// every command alike.
pub mod values {
    use std::ffi::OsStr;
    use std::marker::PhantomData;

    use clap::builder::TypedValueParser;
    use clap::error::{Error, ErrorKind};
    use clap::{Arg, Command};

    /// Training steps (and evaluation intervals) a run may ask for.
    pub const MAX_STEPS: u64 = 1_000_000_000;
    /// Batch rows; the memory check refuses what cannot fit long before this.
    pub const MAX_BATCH: u64 = u32::MAX as u64;
    /// Tokens one sample may generate.
    pub const MAX_TOKENS: u64 = 1_000_000_000;
    /// Context lengths `bench-generate` may run for.
    pub const MAX_WINDOWS: u64 = 10_000;
    /// A LoRA rank (as `LoraConfig` allows).
    pub const MAX_RANK: u64 = 4096;
    /// Tokens top-k can keep: the byte vocabulary.
    pub const VOCAB: u64 = 256;

    fn flag(arg: Option<&Arg>) -> String {
        arg.and_then(Arg::get_long).map_or_else(|| "the value".into(), |l| format!("--{l}"))
    }

    fn refuse(cmd: &Command, message: String) -> Error {
        Error::raw(ErrorKind::ValueValidation, message).with_cmd(cmd)
    }

    /// A whole number from `min` to `max`, as `T`.
    #[derive(Clone, Copy, Debug)]
    pub struct Count<T> {
        min: u64,
        max: u64,
        out: PhantomData<fn() -> T>,
    }

    /// A count from `min` to `max` (`T` must hold `max`).
    pub const fn count<T>(min: u64, max: u64) -> Count<T> {
        Count { min, max, out: PhantomData }
    }

    impl<T: TryFrom<u64> + Clone + Send + Sync + 'static> TypedValueParser for Count<T> {
        type Value = T;

        fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<T, Error> {
            let text = value.to_string_lossy();
            let (min, max) = (self.min, self.max);
            let n = text.trim().parse::<i128>().ok().filter(|n| (min as i128..=max as i128).contains(n));
            n.and_then(|n| T::try_from(n as u64).ok()).ok_or_else(|| {
                let range = match min {
                    1 => format!("positive (a whole number from 1 to {max})"),
                    _ => format!("a whole number from {min} to {max}"),
                };
                refuse(cmd, format!("{} must be {range}, got {text}", flag(arg)))
            })
        }
    }

    /// Which finite numbers a float flag takes.
    #[derive(Clone, Copy, Debug)]
    pub enum Range {
        /// Above 0.
        Positive,
        /// 0 or more.
        NonNegative,
        /// Above 0 and at most 1.
        Fraction,
    }

    impl Range {
        fn contains(self, v: f64) -> bool {
            match self {
                Range::Positive => v > 0.0,
                Range::NonNegative => v >= 0.0,
                Range::Fraction => v > 0.0 && v <= 1.0,
            }
        }

        fn words(self) -> &'static str {
            match self {
                Range::Positive => "positive",
                Range::NonNegative => "0 or more",
                Range::Fraction => "above 0 and at most 1",
            }
        }
    }

    /// A finite number in a [`Range`], as `T`; it must also be finite as an `f32`, the
    /// precision every float flag ends up in (so `1e300` is refused, not made infinite).
    #[derive(Clone, Copy, Debug)]
    pub struct Float<T> {
        range: Range,
        out: PhantomData<fn() -> T>,
    }

    /// A float flag's parser.
    pub const fn float<T>(range: Range) -> Float<T> {
        Float { range, out: PhantomData }
    }

    impl<T: std::str::FromStr + Into<f64> + Clone + Send + Sync + 'static> TypedValueParser for Float<T> {
        type Value = T;

        fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<T, Error> {
            let text = value.to_string_lossy();
            let words = self.range.words();
            let parsed = text.trim().parse::<T>().ok();
            let v = parsed.clone().map_or(f64::NAN, Into::into);
            if !(v.is_finite() && (v as f32).is_finite()) {
                return Err(refuse(
                    cmd,
                    format!("{} must be a finite number, {words}, got {text}", flag(arg)),
                ));
            }
            if !self.range.contains(v) {
                return Err(refuse(cmd, format!("{} must be {words}, got {text}", flag(arg))));
            }
            Ok(parsed.expect("finite"))
        }
    }
}
