// WebGPU in the worker (SwiftShader, Chromium's software adapter, with --enable-unsafe-webgpu):
// the capability panel, training `tiny` on the GPU, its checkpoint continuing in the WASM
// build, pause/stop latency, a lost device mid-run, and the fallback without WebGPU. Run by
// `cargo xtask test-web`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WEBGPU_FLAGS, openBrowser, openPage, setField, stepNow, timeAnswer, waitReady, waitStep } from './harness.mjs';

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
// The page is cross-origin isolated and Chromium validates relaxed SIMD: the build a run
// continues on when the GPU fails is the best WASM one, as `auto` would pick it.
const BEST_WASM = 'wasm-relaxed-simd-threads';

/** Records every `progress.backend` the page receives, in `window.__backends`. */
function recordBackends(page) {
  return page.evaluate(() => {
    window.__backends = [];
    window.tinygpt.client.on('progress', (m) => window.__backends.push(m.backend));
  });
}

/** Waits until the checkpoint `saved` is the run and its first step since loading is reported. */
function waitContinued(page, saved) {
  return page.waitForFunction(
    (id) => window.tinygpt.state.run?.checkpointId === id && window.tinygpt.state.firstProgressStep != null,
    saved.id,
    { timeout: 60_000 },
  );
}

async function trainingSettings(page, { maxSteps, checkpointInterval }) {
  await setField(page, 'max_steps', maxSteps);
  await setField(page, 'learning_rate', 0.003);
  await setField(page, 'warmup_steps', 5);
  await setField(page, 'eval_interval', 1000);
  await setField(page, 'checkpoint_interval', checkpointInterval);
}

test('with WebGPU the worker trains on it: panel, self-test passed, tiny loss falls, checkpoint continues and samples in the WASM build', { timeout: 420_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context);
    const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
    assert.ok(caps.webgpu, `an adapter is reported: ${JSON.stringify(caps)}`);
    assert.ok(caps.webgpu.adapter.length > 0, 'the adapter has a name');
    assert.equal(caps.webgpu.fallbackAdapter, true, 'SwiftShader is a fallback (software) adapter');
    assert.ok(caps.webgpu.limits.maxStorageBufferBindingSize >= 128 * 2 ** 20, JSON.stringify(caps.webgpu.limits));
    assert.ok(caps.webgpu.limits.maxComputeWorkgroupSizeX >= 256);
    // One line: the device, that it is a software fallback, that training runs on it, and
    // what mixed precision's matmul runs there and why; the feature list and limits sit
    // behind a disclosure.
    const panel = await page.textContent('#cap-webgpu');
    assert.ok(panel.startsWith(caps.webgpu.adapter), panel);
    assert.match(panel, /\(software fallback\) · training runs here · mixed precision runs /);
    assert.ok(!panel.includes('\n') && !panel.includes('max storage binding'), panel);
    assert.equal(await page.isVisible('#cap-webgpu-more'), false, 'the details start closed');
    const more = await page.textContent('#cap-webgpu-more');
    assert.match(more, /max storage binding/);
    assert.match(more, /Features: /);
    // `auto` found an adapter and the self-test passed: training runs on WebGPU.
    assert.equal(caps.backend, 'webgpu', `backend: ${caps.backend}; note: ${caps.backendNote}`);
    assert.equal(caps.backendNote, undefined);
    assert.equal(await page.textContent('#cap-backend'), 'webgpu');

    await trainingSettings(page, { maxSteps: 400, checkpointInterval: 1000 });
    await recordBackends(page);
    await page.click('#train');
    await waitStep(page, 30, 240_000);
    const train = await page.evaluate(() => window.tinygpt.chart.train.slice());
    const first = mean(train.slice(0, 5));
    const last = mean(train.slice(-10));
    assert.ok(first > 5.0, `the first losses start near ln 256: ${first}`);
    assert.ok(last < first - 0.5, `loss should fall on WebGPU: first 5 steps ${first.toFixed(3)}, last 10 ${last.toFixed(3)}`);
    const backends = await page.evaluate(() => [...new Set(window.__backends)]);
    assert.deepEqual(backends, ['webgpu'], 'every progress message says webgpu');

    // Stop saves a checkpoint (read back from the GPU).
    await page.click('#stop');
    await page.waitForFunction(() => window.tinygpt.state.lastSaved && window.tinygpt.state.lastSaved.step === window.tinygpt.state.step, null, { timeout: 60_000 });
    const saved = await page.evaluate(() => window.tinygpt.state.lastSaved);
    assert.ok(saved.step >= 30, `saved at step ${saved.step}`);
    console.log(`webgpu tiny: ${saved.step} steps; loss ${first.toFixed(3)} → ${last.toFixed(3)}`);

    // The same checkpoint continues in the WASM build: switch the backend, resume the last run.
    await page.selectOption('#backend', 'wasm-simd');
    await waitReady(page);
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), 'wasm-simd');
    await page.waitForSelector('#resume-banner:not([hidden])', { timeout: 30_000 });
    await recordBackends(page);
    await page.click('#resume-last');
    await waitContinued(page, saved);
    assert.equal(await page.evaluate(() => window.tinygpt.state.firstProgressStep), saved.step + 1, 'continues with the next step');
    await waitStep(page, saved.step + 10);
    await page.click('#pause');
    await page.waitForFunction(() => window.tinygpt.state.runState === 'paused');
    const continued = await page.evaluate(() => window.tinygpt.chart.train.slice());
    assert.ok(mean(continued.slice(-5)) < first - 0.5, `the loaded weights are the trained ones: ${mean(continued.slice(-5))}`);
    assert.deepEqual(await page.evaluate(() => [...new Set(window.__backends)]), ['wasm-simd']);
    await page.fill('#length', '60');
    await page.fill('#prompt', 'ROMEO:');
    await page.click('#generate');
    await page.waitForFunction(() => !window.tinygpt.state.sampling, null, { timeout: 60_000 });
    const sample = await page.textContent('#sample-output');
    assert.ok(sample.startsWith('ROMEO:') && sample.length > 20, `sampled text: ${JSON.stringify(sample)}`);
    assert.deepEqual(page.pageErrors, []);
    assert.deepEqual(page.consoleErrors, []);
  } finally {
    await browser.close();
  }
});

test('on WebGPU pause and stop answer within 200 ms (tiny)', { timeout: 300_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context, '?storage=memory');
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), 'webgpu');
    await trainingSettings(page, { maxSteps: 1000, checkpointInterval: 1000 });
    await page.click('#train');
    await waitStep(page, 5, 240_000);
    const pauses = [];
    for (let i = 0; i < 4; i++) {
      pauses.push(await timeAnswer(page, 'pause', 'status', "m.state === 'paused'"));
      const pausedAt = await stepNow(page);
      await page.waitForTimeout(300);
      assert.equal(await stepNow(page), pausedAt, 'no steps while paused');
      await timeAnswer(page, 'resume', 'status', "m.state === 'training'");
      await page.waitForTimeout(150 + 170 * i);
    }
    const stopMs = await timeAnswer(page, 'stop', 'done', "m.reason === 'stopped'");
    const stoppedAt = await stepNow(page);
    console.log(`webgpu tiny: pause ${pauses.map((ms) => ms.toFixed(0)).join(', ')} ms; stop ${stopMs.toFixed(0)} ms; ${stoppedAt} steps`);
    for (const ms of pauses) assert.ok(ms < 200, `pause took ${ms.toFixed(0)} ms`);
    assert.ok(stopMs < 200, `stop took ${stopMs.toFixed(0)} ms`);
    await page.waitForTimeout(400);
    assert.equal(await stepNow(page), stoppedAt, 'no steps after stop');
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('on WebGPU pause and stop answer within 200 ms during a step of large', { timeout: 300_000 }, async () => {
  // A step of `large` takes well over a minute on SwiftShader, so this does not wait for one:
  // it pauses and stops while the first step's parts run on the device (the step counter is
  // still 0), which is exactly when the answer must not wait for the device.
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context, '?storage=memory&preset=large');
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), 'webgpu');
    assert.equal(await page.inputValue('#preset'), 'large');
    await trainingSettings(page, { maxSteps: 1000, checkpointInterval: 1000 });
    await page.click('#train');
    await page.waitForFunction(() => window.tinygpt.state.runState === 'training', null, { timeout: 60_000 });
    // Past the first part's recording (pipelines are compiled then): the device is busy.
    await page.waitForTimeout(4000);
    const pauses = [];
    for (let i = 0; i < 2; i++) {
      pauses.push(await timeAnswer(page, 'pause', 'status', "m.state === 'paused'"));
      await timeAnswer(page, 'resume', 'status', "m.state === 'training'");
      await page.waitForTimeout(1500);
    }
    const stopMs = await timeAnswer(page, 'stop', 'done', "m.reason === 'stopped'");
    const step = await stepNow(page);
    console.log(`webgpu large: pause ${pauses.map((ms) => ms.toFixed(0)).join(', ')} ms; stop ${stopMs.toFixed(0)} ms; during step ${step + 1}`);
    assert.equal(step, 0, 'every answer came while the first step ran on the device');
    for (const ms of pauses) assert.ok(ms < 200, `pause took ${ms.toFixed(0)} ms`);
    assert.ok(stopMs < 200, `stop took ${stopMs.toFixed(0)} ms`);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('a model too big for the GPU is an out-of-memory error naming the sizes; saved checkpoints survive and continue on WASM', { timeout: 420_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context);
    const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
    assert.equal(caps.backend, 'webgpu');
    // A saved run first: tiny, checkpointed at step 5.
    await trainingSettings(page, { maxSteps: 400, checkpointInterval: 5 });
    await page.click('#train');
    await page.waitForFunction(() => (window.tinygpt.state.lastSaved?.step ?? 0) >= 5, null, { timeout: 240_000 });
    await page.click('#pause');
    await page.waitForFunction(() => window.tinygpt.state.runState === 'paused');
    const saved = await page.evaluate(() => window.tinygpt.state.lastSaved);

    // 320 heads of one channel over 1024 tokens: one row's attention probabilities are
    // 320·1024² floats (1.25 GiB), above SwiftShader's 1 GiB largest storage binding, while
    // the whole run fits the worker's 4 GiB estimate, so the GPU is what refuses it.
    const limit = caps.webgpu.limits.maxStorageBufferBindingSize;
    const heads = 320;
    assert.ok(heads * 1024 * 1024 * 4 > limit, `the probabilities exceed ${limit} bytes`);
    await page.evaluate(({ heads }) => {
      const { state, client } = window.tinygpt;
      client.send({
        type: 'train',
        preset: 'tiny',
        modelConfig: { ...state.run.modelConfig, n_layers: 1, d_model: heads, n_heads: heads, d_mlp: 4 * heads, context_length: 1024 },
        trainingConfig: { ...state.run.trainingConfig, batch_size: 1, checkpoint_interval: 1000, eval_interval: 1000 },
        dataset: { name: state.dataset.name, bytes: state.dataset.bytes.slice() },
      });
    }, { heads });
    await page.waitForSelector('#notices .notice[data-code="deviceLost"]', { timeout: 120_000 });
    const notice = await page.textContent('#notices .notice[data-code="deviceLost"]');
    console.log(`webgpu out of memory: ${notice}`);
    assert.match(notice, /The GPU ran out of memory/);
    assert.match(notice, /largest storage binding \(\d+ bytes\)/);
    assert.ok(notice.includes(String(limit)), 'names the limit');
    // Refused before anything was allocated: the paused run it would have replaced is untouched.
    assert.equal(await page.evaluate(() => window.tinygpt.state.runState), 'paused');
    assert.deepEqual(page.pageErrors, [], 'an error message, not a crash');
    const ids = await page.evaluate(() => window.tinygpt.state.checkpoints.map((c) => c.id));
    assert.ok(ids.includes(saved.id), `the saved checkpoint is still listed: ${ids}`);
    assert.equal(await page.evaluate(() => window.tinygpt.state.lastSaved.id), saved.id, 'nothing was saved from the failed run');

    // Falls back cleanly: the offered WASM worker continues the saved run.
    await page.click(`#notices .notice[data-code="deviceLost"] button:has-text("Continue on ${BEST_WASM}")`);
    await waitReady(page);
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), BEST_WASM);
    await waitContinued(page, saved);
    assert.equal(await page.evaluate(() => window.tinygpt.state.firstProgressStep), saved.step + 1);
    await waitStep(page, saved.step + 3);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('a GPU device lost mid-run is an error, the last checkpoint is intact, and the page continues on WASM from it', { timeout: 420_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context);
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), 'webgpu');
    await trainingSettings(page, { maxSteps: 400, checkpointInterval: 10 });
    await page.click('#train');
    await page.waitForFunction(() => (window.tinygpt.state.lastSaved?.step ?? 0) >= 10, null, { timeout: 240_000 });
    const savedBefore = await page.evaluate(() => window.tinygpt.state.lastSaved);
    // Lose the device the way a driver reset does: the next command encoder the worker asks
    // for destroys its GPUDevice first (a test hook injected into the worker, not in the app).
    const [worker] = page.workers();
    await worker.evaluate(() => {
      const create = GPUDevice.prototype.createCommandEncoder;
      GPUDevice.prototype.createCommandEncoder = function (descriptor) {
        GPUDevice.prototype.createCommandEncoder = create;
        this.destroy();
        return create.call(this, descriptor);
      };
    });
    await page.waitForSelector('#notices .notice[data-code="deviceLost"]', { timeout: 60_000 });
    const notice = await page.textContent('#notices .notice[data-code="deviceLost"]');
    assert.match(notice, /GPU stopped working/);
    await page.waitForFunction(() => window.tinygpt.state.runState === 'stopped', null, { timeout: 30_000 });
    const saved = await page.evaluate(() => window.tinygpt.state.lastSaved);
    assert.ok(saved.step >= savedBefore.step && saved.step % 10 === 0, `only interval saves, none from the lost device: ${JSON.stringify(saved)}`);
    assert.deepEqual(page.pageErrors, [], 'an error message, not a crash');

    await page.click(`#notices .notice[data-code="deviceLost"] button:has-text("Continue on ${BEST_WASM}")`);
    await waitReady(page);
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), BEST_WASM);
    await waitContinued(page, saved);
    const resumed = await page.evaluate(() => window.tinygpt.state.firstProgressStep);
    assert.equal(resumed, saved.step + 1, 'continues from the last checkpoint');
    await waitStep(page, saved.step + 5);
    assert.equal(await page.evaluate(() => window.tinygpt.state.lastProgress.backend), BEST_WASM);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('without WebGPU the worker falls back to WASM and the panel gives the reason', { timeout: 120_000 }, async () => {
  const browser = await openBrowser();
  try {
    for (const query of ['?storage=memory', '?storage=memory&backend=webgpu']) {
      const page = await openPage(browser.context, query);
      const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
      assert.equal(caps.webgpu, undefined, 'no adapter without --enable-unsafe-webgpu');
      // The page is cross-origin isolated and Chromium has relaxed SIMD, so the best WASM
      // build is relaxed SIMD + threads.
      assert.equal(caps.backend, 'wasm-relaxed-simd-threads', query);
      assert.match(caps.backendNote, /WebGPU/);
      assert.ok(!caps.backendNote.includes('\n'), 'one line');
      assert.ok(!caps.backendNote.includes('wasm'), `the note gives the reason, not the name again: ${caps.backendNote}`);
      assert.match(await page.textContent('#cap-webgpu'), /^no — /);
      // "Running" names the engine once, then the reason.
      const running = await page.textContent('#cap-backend');
      assert.equal(running, `wasm-relaxed-simd-threads — ${caps.backendNote}`);
      assert.equal(running.split('wasm-relaxed-simd-threads').length, 2, running);
      assert.equal(caps.mixedMatmul, undefined, 'no mixed path off WebGPU');
      assert.deepEqual(page.pageErrors, []);
    }
  } finally {
    await browser.close();
  }
});

test('with WebGPU available, choosing wasm-simd keeps training off the GPU and says so', { timeout: 120_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context, '?storage=memory&backend=wasm-simd');
    const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
    assert.ok(caps.webgpu, 'the adapter is still shown');
    assert.equal(caps.backend, 'wasm-simd');
    assert.equal(caps.backendNote, 'chosen in the Backend setting.');
    assert.equal(await page.textContent('#cap-backend'), 'wasm-simd — chosen in the Backend setting.');
    assert.match(await page.textContent('#cap-webgpu'), / · not used: wasm-simd runs \(chosen in the Backend setting\.\)$/);
    // Mixed precision needs WebGPU's matmul: the setting is off here (and the worker would
    // refuse it, naming the reason: worker/tests/mixed.rs).
    assert.equal(await page.isDisabled('#training-fields [name="precision"]'), true);
    assert.equal(await page.inputValue('#training-fields [name="precision"]'), 'f32');
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('mixed precision on WebGPU: the panel names its matmul path, a tiny run trains and tracks f32', { timeout: 420_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context, '?storage=memory');
    const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
    assert.equal(caps.backend, 'webgpu', `backend: ${caps.backend}; note: ${caps.backendNote}`);
    const f16 = caps.webgpu.features.includes('shader-f16');
    const m = caps.mixedMatmul;
    assert.ok(m, `the capabilities carry mixed's matmul path: ${JSON.stringify(caps)}`);
    const panel = await page.textContent('#cap-webgpu');
    console.log(`SwiftShader shader-f16: ${f16}; mixed runs ${m.kernels}: ${m.reason}`);
    if (f16) {
      // The adapter offers shader-f16: the device self-tested the f16 matmul and uses it.
      assert.equal(m.kernels, 'shader-f16', m.reason);
      assert.match(m.reason, /self-test passed/);
      assert.ok(panel.includes(`mixed precision runs f16 matmuls (shader-f16): ${m.reason}`), panel);
    } else {
      // The fallback: mixed asked for, f32 kernels run, and the panel says why.
      assert.equal(m.kernels, 'f32');
      assert.match(m.reason, /^mixed was asked for but \S.* has no shader-f16/, 'names the adapter');
      assert.ok(panel.includes(`mixed precision runs f32 matmuls: ${m.reason}`), panel);
    }
    const precision = '#training-fields [name="precision"]';
    assert.equal(await page.isDisabled(precision), false, 'the setting is on with WebGPU');
    assert.equal(await page.inputValue(precision), 'f32', 'f32 by default');

    // The same tiny run at f32, then at mixed; every step's training loss recorded.
    await page.evaluate(() => {
      window.__losses = [];
      window.__errors = [];
      // By step: a validation loss may come again with its step's point.
      window.tinygpt.client.on('progress', (p) => p.points.forEach((q) => { window.__losses[q.step - 1] = q.trainLoss; }));
      window.tinygpt.client.on('error', (m) => window.__errors.push(m));
    });
    const steps = 12;
    const run = async (value) => {
      await page.evaluate(() => { window.__losses = []; });
      await setField(page, 'max_steps', steps);
      await setField(page, 'learning_rate', 0.01);
      await setField(page, 'warmup_steps', 2);
      await setField(page, 'eval_interval', 1000);
      await setField(page, 'eval_batches', 1);
      await setField(page, 'checkpoint_interval', 1000);
      await setField(page, 'precision', value);
      await page.click('#train');
      // The new run has started (the last one may have finished at a higher step).
      await page
        .waitForFunction((v) => window.tinygpt.state.runState === 'training' && (window.tinygpt.state.run?.trainingConfig?.precision ?? 'f32') === v, value, { timeout: 60_000 })
        .catch(async (e) => {
          const seen = await page.evaluate(() => ({ state: window.tinygpt.state.runState, errors: window.__errors }));
          throw new Error(`the ${value} run did not start: ${JSON.stringify(seen)}`, { cause: e });
        });
      if (value === 'mixed') {
        // Loss scaling's readback comes after the device has finished each step, so pause
        // still answers at once (and the run goes on from where it stood).
        await waitStep(page, 5, 240_000);
        const pauseMs = await timeAnswer(page, 'pause', 'status', "m.state === 'paused'");
        assert.ok(pauseMs < 200, `pause at mixed took ${pauseMs.toFixed(0)} ms`);
        await timeAnswer(page, 'resume', 'status', "m.state === 'training'");
      }
      const t0 = Date.now();
      await page
        .waitForFunction((n) => window.tinygpt.state.runState === 'finished' && window.__losses.filter((l) => l != null).length >= n, steps, {
          timeout: 150_000,
        })
        .catch(async (e) => {
          const seen = await page.evaluate(() => ({ state: window.tinygpt.state.runState, step: window.tinygpt.state.step, losses: window.__losses }));
          throw new Error(`${value} run did not finish: ${JSON.stringify(seen)}; errors ${JSON.stringify(page.consoleErrors)} ${JSON.stringify(page.pageErrors)}`, { cause: e });
        });
      console.log(`${value}: ${steps} steps in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      const config = await page.evaluate(() => window.tinygpt.state.run.trainingConfig);
      assert.equal(config.precision ?? 'f32', value, `the run's saved config: ${JSON.stringify(config)}`);
      return page.evaluate(() => window.__losses.slice());
    };
    const f32 = await run('f32');
    const mixed = await run('mixed');
    assert.equal(mixed.length, steps);
    const head = mean(mixed.slice(0, 3));
    const tail = mean(mixed.slice(-3));
    assert.ok(tail < head - 0.3, `mixed loss falls: first 3 steps ${head.toFixed(3)}, last 3 ${tail.toFixed(3)}`);
    // Tolerance: with f32 kernels (the fallback) loss scaling multiplies and divides by powers
    // of two, which is exact in f32, so the runs agree bit for bit (seen on SwiftShader: 0); with f16 inputs each
    // product is off by about √K·2⁻¹¹ relative (K ≤ 256 here: ~1%), so the loss may drift by
    // a few hundredths over 20 steps. 0.05 nats covers both and still catches a run that
    // skipped steps or applied unscaled gradients (those diverge by tenths within steps).
    const worst = Math.max(...mixed.map((l, i) => Math.abs(l - f32[i])));
    console.log(`mixed vs f32 over ${steps} steps: worst |Δloss| ${worst.toExponential(2)}; f32 ${f32[0].toFixed(3)} → ${f32[steps - 1].toFixed(3)}`);
    assert.ok(worst <= 0.05, `mixed tracks f32 within 0.05: worst ${worst}`);
    assert.deepEqual(page.pageErrors, []);
    assert.deepEqual(page.consoleErrors, []);
  } finally {
    await browser.close();
  }
});
