// `cargo xtask bench-web`: training speed of the scalar, SIMD and SIMD + threads builds and
// the two relaxed-SIMD twins in headless Chromium, `small`, `medium` and `large` presets. One JSON
// line per run (with the machine's hardware threads), then the SIMD/scalar, threads/SIMD and
// relaxed/plain ratios per preset. Timing is the page's wall clock between progress messages after warm-up, so
// it is the speed a user sees (slicing and messaging included), over at least
// TINYGPT_BENCH_STEPS steps (12) and at least TINYGPT_BENCH_MIN_MS (4,000) ms. After the timed
// steps it times three pauses and a stop (`pause_ms_max`, `stop_ms`: click to the worker's answer).
//
// TINYGPT_BENCH_PRESETS and TINYGPT_BENCH_BACKENDS (comma-separated) pick other runs; with
// `webgpu` among the backends Chromium starts with WebGPU on (SwiftShader headless), e.g.
// TINYGPT_BENCH_BACKENDS=webgpu TINYGPT_BENCH_PRESETS=tiny,small,medium,large.
//
// TINYGPT_BENCH_ROUNDS (1) repeats every run that many times, in turn; the ratio lines take
// each build's best run. TINYGPT_BENCH_PYTORCH (a Python that imports torch; `cargo xtask
// bench-web --pytorch PYTHON`) runs the PyTorch twin (bench/pytorch_twin.py, on the CPU) right
// after each CPU build's run, at its preset and thread count, and adds `pytorch_tok_per_s` and
// `over_pytorch` to the run's line: the tab against PyTorch back to back, a ratio that holds
// from one machine to another where tok/s alone does not.
//
// TINYGPT_BENCH_LORA (comma-separated LoRA presets, e.g. `qv-r4`) adds adapter training runs
// through the LoRA panel: the bundled `medium` base (frozen) over
// tests-web/fixtures/lora-text.rs.txt at the base's batch size, timed the same way
// (`preset` is `lora-<preset>`; `adapter_over_full` compares with `medium` full training of
// the same backend in this run, when PRESETS includes it).
//
// TINYGPT_BENCH_LORA_BASE_URL (a folder URL, e.g. `/fixtures/bench/gpt2-124m/`, which the
// xtask server serves from target/bench/; bench/make_gpt2_folder.py writes it) makes those
// adapter runs load that Hugging Face GPT-2 folder by URL as their base instead of the
// bundled one, at its default batch (4) and window (256 tokens): issue 37's tab figure.
// Leave full training out with TINYGPT_BENCH_PRESETS set empty.

import { execFileSync } from 'node:child_process';

import { BUILDS, backendOf } from '../www/lib/builds.js';
import { WEBGPU_FLAGS, openBrowser, openPage, setField } from './harness.mjs';

// Set but empty: none (TINYGPT_BENCH_PRESETS= runs LoRA only).
const list = (name, fallback) =>
  process.env[name] !== undefined ? process.env[name].split(',').filter((s) => s !== '') : fallback;
const PRESETS = list('TINYGPT_BENCH_PRESETS', ['small', 'medium', 'large']);
const BACKENDS = list('TINYGPT_BENCH_BACKENDS', Object.keys(BUILDS));
const WARMUP = 2;
const STEPS = Number(process.env.TINYGPT_BENCH_STEPS || 12);
// The shortest timed window: 12 steps of the relaxed threads build at `medium` took 1.3 s,
// and five runs in a row gave 9,877 to 12,416 tok/s.
const MIN_MS = Number(process.env.TINYGPT_BENCH_MIN_MS || 4_000);
const LORA = list('TINYGPT_BENCH_LORA', []);
const ROUNDS = Number(process.env.TINYGPT_BENCH_ROUNDS || 1);
const PYTORCH = process.env.TINYGPT_BENCH_PYTORCH;
const LORA_BASE_URL = process.env.TINYGPT_BENCH_LORA_BASE_URL;

/** The PyTorch twin's tok/s at `preset` on `threads` CPU threads (its last JSON line). */
function pytorchTokPerS(preset, threads) {
  const args = ['bench/pytorch_twin.py', '--device', 'cpu', '--threads', String(threads)];
  args.push('--presets', preset, '--steps', '20');
  const lines = execFileSync(PYTORCH, args, { encoding: 'utf8' }).trim().split('\n');
  return JSON.parse(lines[lines.length - 1]).tok_per_s;
}

/** Starts full training of the preset (the Training card). */
async function startFull(page, total) {
  // More steps than timed: pause and stop are timed after the timed steps.
  await setField(page, 'max_steps', total + 10_000);
  await setField(page, 'eval_interval', 1_000_000);
  await setField(page, 'eval_batches', 1);
  await setField(page, 'checkpoint_interval', 1_000_000);
  await page.click('#train');
}

/** Starts an adapter run of LoRA preset `lora` on the bundled base (the LoRA panel). */
function startAdapter(lora) {
  return async (page, total) => {
    await page.setInputFiles('#file-input', 'tests-web/fixtures/lora-text.rs.txt');
    await page.waitForFunction(() => window.tinygpt.state.dataset?.name === 'lora-text.rs.txt');
    if (LORA_BASE_URL) {
      // A 124M folder: 500 MB fetched, imported and checked.
      await page.selectOption('#lora-base-source', 'url');
      await page.fill('#lora-base-url', LORA_BASE_URL);
    }
    await page.click('#lora-load-base');
    await page.waitForFunction(() => window.tinygpt.lora.state.base, null, { timeout: 590_000 });
    await page.fill('#lora-name', 'bench');
    await page.selectOption('#lora-preset', lora);
    // Evaluations and saves come every 200 steps by default: after the timed ones.
    await page.fill('#lora-steps', String(total + 10_000));
    await page.click('#lora-train');
  };
}

async function run(context, backend, preset, start = startFull) {
  // A GPT-2 base by URL is kept in OPFS, not in the worker's memory beside the run.
  const storage = LORA_BASE_URL && preset.startsWith('lora-') ? 'opfs' : 'memory';
  const page = await openPage(context, `?backend=${backend}&storage=${storage}&preset=${preset.startsWith('lora-') ? 'medium' : preset}`);
  const info = await page.evaluate(() => {
    const p = window.tinygpt.state;
    return { backend: p.capabilities.backend, threads: p.capabilities.threads ?? 1, hardwareThreads: p.capabilities.hardwareThreads };
  });
  if (info.backend !== backend) throw new Error(`asked for ${backend}, got ${info.backend}`);
  const total = WARMUP + STEPS + 1;
  await page.evaluate(() => {
    window.__progress = [];
    window.tinygpt.client.on('progress', (m) => window.__progress.push([performance.now(), m.step]));
  });
  await start(page, total);
  // Until `total` steps and at least MIN_MS between the first and last timed reports.
  await page.waitForFunction(
    ([n, warmup, ms]) => {
      const timed = window.__progress.filter(([, step]) => step >= warmup);
      return window.tinygpt.state.step >= n && timed.length > 1 && timed[timed.length - 1][0] - timed[0][0] >= ms;
    },
    [total, WARMUP, MIN_MS],
    { timeout: 590_000, polling: 500 },
  );
  const records = await page.evaluate(() => window.__progress);
  const pauseMs = [];
  for (let i = 0; i < 3; i++) {
    pauseMs.push(await answerMs(page, 'pause', 'status', 'paused'));
    await answerMs(page, 'resume', 'status', 'training');
    await page.waitForTimeout(200 + 170 * i);
  }
  const stopMs = await answerMs(page, 'stop', 'done', 'stopped');
  const tokensPerStep = await page.evaluate(() => {
    const r = window.tinygpt.state.run;
    return r.trainingConfig.batch_size * r.modelConfig.context_length;
  });
  await page.close();
  // From the first report at or after warm-up to the last one so far (the run's final step,
  // whose report waits for the end-of-run evaluation, is 10,000 steps on).
  const usable = records.filter(([, step]) => step >= WARMUP);
  const [t0, s0] = usable[0];
  const [t1, s1] = usable[usable.length - 1];
  if (s1 <= s0) throw new Error(`too few progress reports to time ${backend}/${preset}: ${JSON.stringify(records)}`);
  const msPerStep = (t1 - t0) / (s1 - s0);
  return {
    backend,
    preset,
    ...(LORA_BASE_URL && preset.startsWith('lora-') ? { base_url: LORA_BASE_URL, tokens_per_step: tokensPerStep } : {}),
    threads: info.threads,
    hardware_threads: info.hardwareThreads,
    ms_per_step: +msPerStep.toFixed(2),
    tok_per_s: Math.round((tokensPerStep * 1000) / msPerStep),
    steps: s1 - s0,
    pause_ms_max: Math.round(Math.max(...pauseMs)),
    stop_ms: Math.round(stopMs),
  };
}

/** Clicks `button`; the ms until the worker answers `type` with state or reason `value`. */
function answerMs(page, button, type, value) {
  return page.evaluate(
    ([button, type, value]) =>
      new Promise((resolve) => {
        const t0 = performance.now();
        let answered = false;
        window.tinygpt.client.on(type, (m) => {
          if (!answered && (m.state === value || m.reason === value)) {
            answered = true;
            resolve(performance.now() - t0);
          }
        });
        document.getElementById(button).click();
      }),
    [button, type, value],
  );
}

const browser = await openBrowser({ args: BACKENDS.includes('webgpu') ? WEBGPU_FLAGS : [] });
try {
  const results = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const preset of PRESETS) {
      for (const backend of BACKENDS) {
        const r = await run(browser.context, backend, preset);
        if (PYTORCH && backend !== 'webgpu') {
          r.pytorch_tok_per_s = pytorchTokPerS(preset, r.threads);
          r.over_pytorch = +(r.tok_per_s / r.pytorch_tok_per_s).toFixed(3);
        }
        results.push(r);
        console.log(JSON.stringify(r));
      }
    }
  }
  /** The fastest of `backend`'s runs at `preset`. */
  const best = (preset, backend) =>
    results
      .filter((r) => r.preset === preset && r.backend === backend)
      .reduce((a, r) => (a && a.tok_per_s >= r.tok_per_s ? a : r), undefined);
  for (const lora of LORA) {
    for (const backend of BACKENDS) {
      const r = await run(browser.context, backend, `lora-${lora}`, startAdapter(lora));
      const full = best('medium', backend);
      if (full) r.adapter_over_full = +(r.tok_per_s / full.tok_per_s).toFixed(3);
      results.push(r);
      console.log(JSON.stringify(r));
    }
  }
  for (const preset of PRESETS) {
    // This preset's result for each build, by the build's name (not the table's order).
    const of = (build) => best(preset, backendOf(build));
    const [scalar, simd, relaxed, threads, relaxedThreads] =
      ['scalar', 'simd', 'relaxed-simd', 'simd-threads', 'relaxed-simd-threads'].map(of);
    const ratio = (a, b) => (a && b ? +(a.tok_per_s / b.tok_per_s).toFixed(3) : undefined);
    const line = {
      preset,
      simd_over_scalar: ratio(simd, scalar),
      threads_over_simd: ratio(threads, simd),
      relaxed_over_simd: ratio(relaxed, simd),
      relaxed_over_threads: ratio(relaxedThreads, threads),
    };
    if (Object.values(line).some((v) => typeof v === 'number')) console.log(JSON.stringify(line));
    // Each build's runs against PyTorch, over several rounds: the median and the lowest ratio.
    for (const backend of ROUNDS > 1 ? BACKENDS : []) {
      const ratios = results
        .filter((r) => r.preset === preset && r.backend === backend && r.over_pytorch !== undefined)
        .map((r) => r.over_pytorch)
        .sort((a, b) => a - b);
      if (ratios.length === 0) continue;
      const mid = ratios.length >> 1;
      const median = ratios.length % 2 ? ratios[mid] : +((ratios[mid - 1] + ratios[mid]) / 2).toFixed(3);
      const line = { preset, backend, runs: ratios.length, over_pytorch_median: median, over_pytorch_min: ratios[0] };
      console.log(JSON.stringify(line));
    }
  }
} finally {
  await browser.close();
}
