// Dropout from the advanced settings, early stopping, and the best checkpoint in the page:
// the best validation loss is shown, and the best checkpoint can be exported and sampled.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openBrowser, openPage, setField, waitReady } from './harness.mjs';

test('dropout and early stop from the advanced settings; the best checkpoint is shown, exported and sampled', { timeout: 300_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?storage=memory');
    await waitReady(page);
    await setField(page, 'dropout', 0.2);
    // A learning rate too small to move the weights: the validation loss stalls at once,
    // so a patience of 1 stops the run after its second evaluation or soon after.
    for (const [name, value] of [['learning_rate', 1e-12], ['min_lr', 1e-12], ['weight_decay', 0], ['warmup_steps', 0],
      ['max_steps', 200], ['eval_interval', 5], ['eval_batches', 1], ['checkpoint_interval', 5], ['early_stop_patience', 1]]) {
      await setField(page, name, value);
    }
    await page.click('#train');
    await page.waitForFunction(() => window.tinygpt.state.runState === 'finished', null, { timeout: 120_000 });
    const run = await page.evaluate(() => ({
      dropout: window.tinygpt.state.run.modelConfig.dropout,
      step: window.tinygpt.state.step,
      best: window.tinygpt.state.bestVal,
    }));
    assert.equal(run.dropout, Math.fround(0.2), 'the run trains with the dropout asked for (an f32)');
    assert.ok(run.step < 200, `stopped early at step ${run.step}`);
    assert.match(await page.textContent('#notices'), /stopped early/);
    assert.ok(run.best && run.best.step < run.step, JSON.stringify(run));
    assert.match(await page.textContent('#stat-best'), new RegExp(`@ ${run.best.step}`));

    // The list marks the best checkpoint; the best line offers it.
    await page.waitForSelector('#best-line:not([hidden])', { timeout: 30_000 });
    const best = await page.evaluate(() => window.tinygpt.state.checkpoints.find((c) => c.best));
    assert.equal(best.step, run.best.step, 'the best checkpoint is the best evaluation\'s');
    assert.match(await page.textContent(`#checkpoint-rows tr[data-id="${best.id}"]`), /best/);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-best')]);
    assert.equal(download.suggestedFilename(), `tinygpt-tiny-step${best.step}.safetensors`);

    // Sampling from the best loads it (paused) and generates.
    await page.click('#sample-best');
    await page.waitForFunction((s) => window.tinygpt.state.run?.step === s, best.step, { timeout: 60_000 });
    await page.waitForFunction(() => !window.tinygpt.state.sampling && /characters at/.test(document.querySelector('#sample-stats').textContent), null, { timeout: 60_000 });
    assert.equal(await page.evaluate(() => window.tinygpt.state.runState), 'paused');
    assert.deepEqual(page.consoleErrors, []);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});
