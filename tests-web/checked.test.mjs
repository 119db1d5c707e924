// Developer mode (issue 12): `?checked` trains on the CPU kernels wrapped in
// tinygpt-kernels-checked, and a run that overflows stops with the first op that went wrong.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openBrowser, openPage, setField } from './harness.mjs';

test('developer mode checks every op and names the one that overflowed', { timeout: 180_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?storage=memory&backend=wasm-simd&checked');
    const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
    assert.equal(caps.checked, true, JSON.stringify(caps));
    assert.match(await page.textContent('#cap-checked'), /^on: every op checked/);
    assert.match(await page.textContent('#cap-backend'), /^wasm-simd — developer mode: every op checked \(/);
    assert.doesNotMatch(await page.getAttribute('#cap-checked-toggle', 'href'), /checked/);

    // A learning rate of 1e30 overflows within a few steps (as cli/tests/checked.rs does).
    const error = page.evaluate(
      () => new Promise((resolve) => window.tinygpt.client.on('error', (m) => resolve(m))),
    );
    await setField(page, 'learning_rate', 1e30);
    await setField(page, 'max_steps', 10);
    await setField(page, 'eval_interval', 100);
    await page.click('#train');
    const m = await error;
    assert.match(m.message, /checked backend stopped at op #\d+ `\w+` \(/, m.message);
    assert.match(m.message, /not finite|out of range|negative/, m.message);
    assert.deepEqual(page.pageErrors, []);

    // Without `?checked` the mode is off and the toggle turns it on.
    const plain = await openPage(browser.context, '?storage=memory&backend=wasm-simd');
    assert.equal(await plain.evaluate(() => window.tinygpt.state.capabilities.checked ?? false), false);
    assert.equal(await plain.textContent('#cap-checked'), 'off');
    assert.match(await plain.getAttribute('#cap-checked-toggle', 'href'), /[?&]checked/);
  } finally {
    await browser.close();
  }
});
