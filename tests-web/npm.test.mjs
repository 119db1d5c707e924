// The npm package as a web developer gets it: examples/web-page/ installed from the tarball
// `npm pack` made (never www/'s files), served on its own origin with COOP/COEP by
// `cargo xtask test-web`, and driven through its buttons, which call the package's client.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EXAMPLE_URL, openBrowser } from './harness.mjs';

test('npm package: the example page trains, pauses, samples, saves and lists through the packed client', { timeout: 300_000 }, async (t) => {
  if (!EXAMPLE_URL) {
    t.skip('TINYGPT_EXAMPLE_URL is unset: run through `cargo xtask test-web`');
    return;
  }
  const browser = await openBrowser();
  try {
    const requests = [];
    browser.context.on('request', (r) => requests.push(r.url()));
    const page = await browser.context.newPage();
    const errors = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(new URL('?backend=wasm-simd-threads', EXAMPLE_URL).href);
    await page.waitForFunction(() => window.example?.model, null, { timeout: 60_000 });
    assert.equal(await page.evaluate(() => crossOriginIsolated), true, 'crossOriginIsolated');
    assert.equal(await page.evaluate(() => window.example.model.capabilities.backend), 'wasm-simd-threads');
    assert.match(await page.textContent('#status'), /^Ready: training on wasm-simd-threads\.$/);
    // The worker and the build came out of the installed package.
    const pkg = `${EXAMPLE_URL}node_modules/tinygpt-web/`;
    for (const path of ['index.js', 'worker-client.js', 'worker.js', 'pkg/simd-threads/tinygpt_worker_bg.wasm']) {
      assert.ok(requests.includes(pkg + path), `${path} was loaded from the package`);
    }

    await page.click('#train');
    await page.waitForFunction(() => /^Step ([5-9]|\d\d+) of 300/.test(document.getElementById('progress').textContent), null, {
      timeout: 120_000,
    });
    await page.click('#pause');
    await page.waitForFunction(() => /^Paused at step \d+\.$/.test(document.getElementById('status').textContent), null, {
      timeout: 30_000,
    });
    const paused = Number((await page.textContent('#status')).match(/\d+/)[0]);
    assert.ok(paused >= 5, `paused at step ${paused}`);

    await page.click('#sample');
    await page.waitForFunction(() => /tokens\/s$/.test(document.getElementById('sample-stats').textContent), null, {
      timeout: 60_000,
    });
    const sample = await page.textContent('#sample-output');
    assert.ok(sample.length > 0, 'the sample streamed text');

    await page.click('#save');
    await page.waitForFunction(() => document.querySelectorAll('#checkpoints li').length > 0, null, { timeout: 60_000 });
    const listed = await page.$$eval('#checkpoints li', (items) => items.map((li) => li.textContent));
    assert.ok(listed.some((line) => line.includes(`step ${paused} of tiny`)), `the list holds the save at step ${paused}: ${listed}`);
    // Paused: no step was taken while sampling and saving.
    assert.match(await page.textContent('#status'), new RegExp(`^Paused at step ${paused}\\.$`));
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
