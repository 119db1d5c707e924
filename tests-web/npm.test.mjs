// The npm package as a web developer gets it: examples/web-page/ installed from the tarball
// `npm pack` made (never www/'s files), served on its own origin with COOP/COEP by
// `cargo xtask test-web`, and driven through its buttons, which call the package's client.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EXAMPLE_URL, openBrowser } from './harness.mjs';

/** The example page at `query`, its model ready; `errors` collects console and page errors. */
async function openExample(browser, query) {
  const page = await browser.context.newPage();
  page.errors = [];
  page.on('console', (m) => m.type() === 'error' && page.errors.push(m.text()));
  page.on('pageerror', (e) => page.errors.push(String(e)));
  await page.goto(new URL(query, EXAMPLE_URL).href);
  await page.waitForFunction(() => window.example?.model, null, { timeout: 60_000 });
  return page;
}

test('npm package: the example page trains, pauses, samples, saves and lists through the packed client', { timeout: 300_000 }, async (t) => {
  if (!EXAMPLE_URL) {
    t.skip('TINYGPT_EXAMPLE_URL is unset: run through `cargo xtask test-web`');
    return;
  }
  const browser = await openBrowser();
  try {
    const requests = [];
    browser.context.on('request', (r) => requests.push(r.url()));
    const page = await openExample(browser, '?backend=wasm-simd-threads');
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
    assert.deepEqual(page.errors, []);
  } finally {
    await browser.close();
  }
});

test('npm package: LoRA through the packed client: the bundled base, an adapter trained, listed and sampled with', { timeout: 300_000 }, async (t) => {
  if (!EXAMPLE_URL) {
    t.skip('TINYGPT_EXAMPLE_URL is unset: run through `cargo xtask test-web`');
    return;
  }
  const browser = await openBrowser();
  try {
    const page = await openExample(browser, '?backend=wasm-simd');
    const result = await page.evaluate(async () => {
      const { model, text } = window.example;
      const base = await model.loadBase('builtin');
      const dataset = { name: 'hamlet.txt', text };
      const run = await model.trainAdapter({ name: 'hamlet', preset: 'qv-r4', dataset, trainingConfig: { max_steps: 4 } });
      const done = await model.finished();
      const adapters = await model.listAdapters();
      const settings = { prompt: 'To be', maxTokens: 24, temperature: 0, seed: 1 };
      const withAdapter = await model.sample({ ...settings, adapter: true }).done;
      const baseAlone = await model.sample({ ...settings, adapter: false }).done;
      // An error rejects: an adapter that does not exist.
      const missing = await model.loadAdapter('no-such-adapter').catch((e) => `${e.name} ${e.code}`);
      return { base, run, done, adapters, withAdapter, baseAlone, missing };
    });
    assert.equal(result.base.source, 'builtin');
    assert.equal(result.run.adapter.name, 'hamlet');
    assert.equal(result.run.adapter.rank, 4);
    assert.deepEqual([result.done.reason, result.done.step], ['finished', 4]);
    const hamlet = result.adapters.find((a) => a.name === 'hamlet');
    assert.ok(hamlet?.fitsBase, `the adapter is listed, on this base: ${JSON.stringify(result.adapters)}`);
    for (const s of [result.withAdapter, result.baseAlone]) {
      assert.equal(s.cancelled, false);
      assert.ok(s.text.length > 0, 'a sample streamed text');
    }
    assert.equal(result.missing, 'TinyGPTError adapterNotFound');
    assert.deepEqual(page.errors, []);
  } finally {
    await browser.close();
  }
});

test('npm package: a GPT-2 base through the packed client, by URL with progress and by files; an adapter on it (on its own window) samples; the kept copy is listed and deleted', { timeout: 300_000 }, async (t) => {
  if (!EXAMPLE_URL) {
    t.skip('TINYGPT_EXAMPLE_URL is unset: run through `cargo xtask test-web`');
    return;
  }
  const browser = await openBrowser();
  try {
    const page = await openExample(browser, '?backend=wasm-simd');
    const result = await page.evaluate(async () => {
      const { model } = window.example;
      const progress = [];
      // Served by the example's server (xtask/src/web_test.rs); relative to the page.
      const byUrl = await model.loadBase({ url: 'fixtures/hf_gpt2/', onProgress: (p) => progress.push(p) });
      const bytes = async (f) => new Uint8Array(await (await fetch(`fixtures/hf_gpt2/${f}`)).arrayBuffer());
      const files = {
        configJson: await bytes('config.json'),
        modelSafetensors: await bytes('model.safetensors'),
        vocabJson: await bytes('vocab.json'),
        mergesTxt: await bytes('merges.txt'),
      };
      const byFiles = await model.loadBase({ files, name: 'tiny gpt2' });
      const text = 'fn main() {\n    let x = 1;\n    println!("{x}");\n}\n'.repeat(60);
      const run = await model.trainAdapter({
        name: 'rusty',
        preset: 'qv-r4',
        dataset: { name: 'main.rs', text },
        trainingConfig: { max_steps: 2, batch_size: 2 },
        context: 32,
      });
      await model.finished();
      const sample = await model.sample({ prompt: 'fn', maxTokens: 8, temperature: 0, seed: 1, adapter: true }).done;
      const missing = await model.loadBase({ url: 'fixtures/nothing/' }).catch((e) => `${e.name} ${e.code}`);
      const otherWindow = await model
        .loadAdapter('rusty', { name: 'main.rs', text }, { context: 16 })
        .catch((e) => `${e.name} ${e.code}`);
      const kept = await model.listBases();
      const deleted = await model.deleteBase(kept[0].url);
      const left = await model.listBases();
      const again = await model.deleteBase(kept[0].url).catch((e) => `${e.name} ${e.code}`);
      return { byUrl, byFiles, progress, run, sample, missing, otherWindow, kept, deleted, left, again };
    });
    assert.equal(result.byUrl.source, 'url');
    assert.equal(result.byFiles.source, 'files');
    assert.equal(result.byFiles.weightsSha256, result.byUrl.weightsSha256);
    const files = new Set(result.progress.map((p) => p.file));
    assert.deepEqual([...files].sort(), ['config.json', 'merges.txt', 'model.safetensors', 'vocab.json']);
    assert.match(result.run.dataset.tokenizer, /^bpe-/);
    assert.equal(result.run.modelConfig.context_length, 32, 'trainAdapter passes its context');
    assert.equal(result.otherWindow, 'TinyGPTError contextMismatch');
    assert.equal(result.kept.length, 1);
    assert.match(result.kept[0].url, /fixtures\/hf_gpt2\/$/);
    assert.ok(result.kept[0].bytes > 700_000 && result.kept[0].fetchedMs > 0, JSON.stringify(result.kept));
    assert.equal(result.deleted.url, result.kept[0].url);
    assert.deepEqual(result.left, []);
    assert.equal(result.again, 'TinyGPTError baseNotFound');
    assert.ok(result.sample.text.length > 0, 'a sample in BPE tokens');
    assert.equal(result.missing, 'TinyGPTError downloadFailed');
    assert.deepEqual(page.errors, []);
  } finally {
    await browser.close();
  }
});
