// The SIMD builds train like the scalar one: same seed, 20 steps of `tiny`, every loss
// equal within 1e-5 relative; the SIMD + threads build gives the SIMD build's losses bit for
// bit (kernels split work by size, never by thread count), and so does the relaxed SIMD +
// threads build the relaxed SIMD build's. The relaxed builds fuse their multiply-adds where
// the machine has FMA, so their weights differ from the SIMD builds' in the last bits: their
// losses must agree within the same tolerance. (Over these
// few steps the reported losses, f32 means of f64 sums near ln 256, have come out equal for
// every build; the kernels' own differences are checked by the conformance kit, per variant.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openBrowser, openPage, setField } from './harness.mjs';

const STEPS = 20;
const RELATIVE_TOLERANCE = 1e-5;

// Synchronous, so a failed assertion throws inside the calling test (an `async` version
// returned a rejected promise that nobody awaited).
function relativeDifferences(a, b, what, tolerance) {
  assert.equal(b.train.length, a.train.length, `${what}: train loss count`);
  assert.equal(b.val.length, a.val.length, `${what}: val loss count`);
  let worst = 0;
  const pairs = [...a.train.map((x, i) => [x, b.train[i], `train step ${i + 1}`]), ...a.val.map((x, i) => [x, b.val[i], `val ${i + 1}`])];
  for (const [x, y, where] of pairs) {
    const rel = Math.abs(x - y) / Math.max(Math.abs(x), 1e-12);
    worst = Math.max(worst, rel);
    assert.ok(rel <= tolerance, `${where}: ${what} ${x}, ${y} (relative ${rel.toExponential(2)})`);
  }
  console.log(`parity (${what}): ${pairs.length} losses, worst relative difference ${worst.toExponential(2)}`);
}

async function losses(context, backend, { preset = 'tiny', steps = STEPS } = {}) {
  const page = await openPage(context, `?backend=${backend}&storage=memory&preset=${preset}`);
  assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), backend);
  await setField(page, 'max_steps', steps);
  await setField(page, 'eval_interval', steps / 2);
  await setField(page, 'eval_batches', 2);
  await page.click('#train');
  await page.waitForFunction(() => window.tinygpt.state.runState === 'finished', null, { timeout: 120_000 });
  const result = await page.evaluate(() => ({
    steps: window.tinygpt.chart.steps.slice(),
    train: window.tinygpt.chart.train.slice(),
    val: window.tinygpt.chart.val.filter((v) => v != null),
  }));
  await page.close();
  return result;
}

test(`SIMD, relaxed SIMD and scalar builds give the same ${STEPS} losses (within ${RELATIVE_TOLERANCE} relative)`, { timeout: 300_000 }, async () => {
  const browser = await openBrowser();
  try {
    const scalar = await losses(browser.context, 'wasm');
    const simd = await losses(browser.context, 'wasm-simd');
    const threads = await losses(browser.context, 'wasm-simd-threads');
    const relaxed = await losses(browser.context, 'wasm-relaxed-simd');
    const relaxedThreads = await losses(browser.context, 'wasm-relaxed-simd-threads');
    assert.deepEqual(threads, simd, 'the threads build gives the SIMD build\'s losses exactly');
    assert.deepEqual(relaxedThreads, relaxed, 'the relaxed threads build gives the relaxed SIMD build\'s losses exactly');
    assert.deepEqual(scalar.steps, Array.from({ length: STEPS }, (_, i) => i + 1));
    assert.equal(scalar.val.length, 2);
    for (const [name, other] of [['simd', simd], ['relaxed simd', relaxed]]) {
      assert.deepEqual(other.steps, scalar.steps);
      relativeDifferences(scalar, other, `scalar against ${name}`, RELATIVE_TOLERANCE);
    }
  } finally {
    await browser.close();
  }
});

test('SIMD + threads and SIMD builds give the same losses bit for bit on whole steps of small, and so do their relaxed twins, within 1e-5 of them', { timeout: 300_000 }, async () => {
  // Both builds take whole steps here (the page shares its message counter: worker/src/parts.rs).
  const browser = await openBrowser();
  try {
    const simd = await losses(browser.context, 'wasm-simd', { preset: 'small', steps: 4 });
    const threads = await losses(browser.context, 'wasm-simd-threads', { preset: 'small', steps: 4 });
    assert.equal(simd.train.length, 4);
    assert.equal(simd.val.length, 2);
    assert.deepEqual(threads, simd);
    const relaxed = await losses(browser.context, 'wasm-relaxed-simd', { preset: 'small', steps: 4 });
    const relaxedThreads = await losses(browser.context, 'wasm-relaxed-simd-threads', { preset: 'small', steps: 4 });
    assert.deepEqual(relaxedThreads, relaxed);
    relativeDifferences(simd, relaxed, 'simd against relaxed simd', RELATIVE_TOLERANCE);
  } finally {
    await browser.close();
  }
});
