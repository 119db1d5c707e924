// LoRA in a real browser, the seed's flow end to end: the bundled base → an adapter trained
// on uploaded text (only the adapter learns) → saved to the adapter store → page reloaded →
// samples with and without the adapter, side by side. On the SIMD WASM build (all 50
// steps of the parity run) and on WebGPU (SwiftShader; its first steps). Both are held to
// tests-web/fixtures/lora-parity.json, the native CPU run's losses for the same settings
// (worker/tests/lora.rs writes and checks that file): within 1% per step.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { openBrowser, openPage, waitReady, WEBGPU_FLAGS } from './harness.mjs';

const TEXT = 'tests-web/fixtures/lora-text.rs.txt';
const FIXTURE = JSON.parse(readFileSync('tests-web/fixtures/lora-parity.json', 'utf8'));

/** Uploads the text, loads the bundled base and starts the fixture's adapter run (qv-r4). */
async function startAdapterRun(page) {
  await page.setInputFiles('#file-input', TEXT);
  await page.waitForFunction(() => window.tinygpt.state.dataset?.name === 'lora-text.rs.txt');
  await page.selectOption('#lora-base-source', 'builtin');
  await page.click('#lora-load-base');
  await page.waitForFunction(() => window.tinygpt.lora.state.base, null, { timeout: 60_000 });
  const base = await page.evaluate(() => window.tinygpt.lora.state.base);
  assert.equal(base.params, 838_400, 'the bundled medium base');
  const t = FIXTURE.trainingConfig;
  await page.fill('#lora-name', 'code');
  await page.selectOption('#lora-preset', FIXTURE.preset);
  await page.fill('#lora-steps', String(t.max_steps));
  await page.fill('#lora-lr', String(t.learning_rate));
  await page.fill('#lora-batch', String(t.batch_size));
  await page.fill('#lora-seed', String(t.seed));
  await page.click('#lora-train');
  await page.waitForFunction(() => window.tinygpt.state.run?.adapter, null, { timeout: 60_000 });
  const run = await page.evaluate(() => window.tinygpt.state.run);
  assert.deepEqual([run.adapter.name, run.adapter.rank, run.adapter.params], ['code', 4, 8192]);
  assert.equal(run.trainingConfig.weight_decay, 0);
}

/** Each step's loss against the fixture's (within 1%); returns the largest relative difference. */
async function checkLosses(page, steps) {
  const { stepsSeen, losses } = await page.evaluate(() => ({
    stepsSeen: window.tinygpt.chart.steps.slice(),
    losses: window.tinygpt.chart.train.slice(),
  }));
  assert.deepEqual(stepsSeen.slice(0, steps), Array.from({ length: steps }, (_, i) => i + 1), 'every step reported');
  let worst = 0;
  for (let i = 0; i < steps; i++) {
    const rel = Math.abs(losses[i] - FIXTURE.losses[i]) / FIXTURE.losses[i];
    worst = Math.max(worst, rel);
    assert.ok(rel <= 0.01, `step ${i + 1}: browser ${losses[i]}, native ${FIXTURE.losses[i]} (relative ${rel.toExponential(2)})`);
  }
  return worst;
}

/** Samples the base alone and base + adapter with the Generate card's settings (greedy). */
async function compare(page, length) {
  await page.fill('#prompt', 'fn ');
  await page.fill('#temperature', '0');
  await page.fill('#length', String(length));
  await page.fill('#seed', '1');
  await page.waitForFunction(() => !document.getElementById('lora-compare').disabled);
  await page.click('#lora-compare');
  await page.waitForFunction(() => window.tinygpt.lora.state.samples.adapter != null, null, { timeout: 240_000 });
  const samples = await page.evaluate(() => window.tinygpt.lora.state.samples);
  assert.equal(await page.textContent('#lora-sample-base'), `fn ${samples.base}`);
  assert.equal(await page.textContent('#lora-sample-adapter'), `fn ${samples.adapter}`);
  return samples;
}

/** After a reload: the base again, the saved adapter from the list, both samples again. */
async function reloadAndCompare(page, length, before) {
  await page.reload();
  await waitReady(page);
  await page.waitForFunction(() => window.tinygpt.lora.state.adapters.some((a) => a.name === 'code'), null, { timeout: 30_000 });
  await page.click('#lora-load-base');
  await page.waitForFunction(() => window.tinygpt.lora.state.adapters.some((a) => a.name === 'code' && a.fitsBase), null, { timeout: 60_000 });
  await page.click('#adapter-rows tr[data-name="code"] button.adapter-use');
  await page.waitForFunction(() => window.tinygpt.lora.state.selected === 'code');
  const after = await compare(page, length);
  assert.deepEqual(after, before, 'after the reload the saved adapter samples as before, and so does the base');
}

test('LoRA on WASM (SIMD): bundled base → adapter on uploaded text (50 steps, losses within 1% of native) → saved → reload → samples with and without', { timeout: 420_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?backend=wasm-simd');
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), 'wasm-simd');
    await startAdapterRun(page);
    const t0 = Date.now();
    await page.waitForFunction(() => window.tinygpt.state.runState === 'finished', null, { timeout: 300_000 });
    const seconds = (Date.now() - t0) / 1000;
    const worst = await checkLosses(page, 50);
    const tps = await page.evaluate(() => window.tinygpt.state.lastProgress.tokensPerSecond);
    const saved = await page.waitForFunction(() => window.tinygpt.messages.includes('adapterSaved'), null, { timeout: 60_000 });
    assert.ok(saved);
    console.log(
      `lora wasm-simd: 50 adapter steps in ${seconds.toFixed(1)} s (last progress ${Math.round(tps)} tok/s); ` +
        `loss ${FIXTURE.losses[0].toFixed(3)} → step 50; largest difference from native ${worst.toExponential(2)}`,
    );
    const before = await compare(page, 40);
    assert.notEqual(before.adapter, before.base, 'the adapter changes what the model writes');
    await reloadAndCompare(page, 40, before);
    assert.deepEqual(page.pageErrors, []);
    assert.deepEqual(page.consoleErrors, []);
  } finally {
    await browser.close();
  }
});

test('LoRA on WebGPU (SwiftShader): the same flow, its first steps within 1% of native, stop saves the adapter', { timeout: 420_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context, '?backend=webgpu');
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), 'webgpu');
    await startAdapterRun(page);
    await page.waitForFunction(() => window.tinygpt.state.step >= 8, null, { timeout: 240_000 });
    await page.click('#stop');
    await page.waitForFunction(() => window.tinygpt.messages.includes('adapterSaved'), null, { timeout: 120_000 });
    const steps = await page.evaluate(() => window.tinygpt.chart.steps.length);
    const worst = await checkLosses(page, steps);
    console.log(`lora webgpu: ${steps} adapter steps, largest difference from native ${worst.toExponential(2)}`);
    const before = await compare(page, 12);
    await reloadAndCompare(page, 12, before);
    assert.deepEqual(page.pageErrors, []);
    assert.deepEqual(page.consoleErrors, []);
  } finally {
    await browser.close();
  }
});
