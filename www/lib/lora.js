// The LoRA panel: load a frozen base, train an adapter on the Dataset card's text, list the
// saved adapters and switch between them, and sample the base alone and base + adapter side
// by side; and the GPT-2 folders kept in browser storage, each with a delete button.
// Everything runs in the worker (worker/PROTOCOL.md, "LoRA"); this only sends messages and
// renders what comes back.

import { renderBases } from './bases.js';
import { forWorker } from './dataset.js';
import { renderRows } from './rows.js';

const $ = (id) => document.getElementById(id);

/** Where the last GPT-2 folder URL is remembered. */
const URL_KEY = 'tinygpt.gpt2BaseUrl';
/** Where the adapter window (the Context field) is remembered. */
const CONTEXT_KEY = 'tinygpt.loraContext';

/** A GPT-2 folder's files and the `loadBase.files` field each goes in. */
const HF_FILES = [
  ['config.json', 'configJson'],
  ['model.safetensors', 'modelSafetensors'],
  ['vocab.json', 'vocabJson'],
  ['merges.txt', 'mergesTxt'],
];

export class LoraPanel {
  /**
   * @param {{client: () => any, state: object, notices: any, sampleSettings: () => object}} options
   */
  constructor({ client, state, notices, sampleSettings }) {
    this.client = client;
    this.page = state;
    this.notices = notices;
    this.sampleSettings = sampleSettings;
    /** What the test and the buttons read: the base, the adapters, the side-by-side samples. */
    this.state = {
      base: null,
      adapters: [],
      selected: null,
      comparing: null,
      samples: { base: null, adapter: null },
      /** The `baseDownload` messages of the last `loadBase`. */
      downloads: [],
      /** The GPT-2 folders kept in browser storage (`bases`). */
      bases: [],
    };
    this.setupControls();
  }

  /** Wires a (new) worker client's LoRA messages. */
  attach(client) {
    client.on('ready', () => {
      client.send({ type: 'listAdapters' });
      client.send({ type: 'listBases' });
    });
    client.on('bases', (m) => {
      this.state.bases = m.items;
      renderBases($('base-rows'), m.items, {
        onDelete: (item) => {
          const what = item.complete ? 'the downloaded copy' : 'the incomplete download';
          if (confirm(`Delete ${what} of ${item.url}? Loading it again downloads it.`)) {
            this.client().send({ type: 'deleteBase', url: item.url });
          }
        },
      });
    });
    client.on('baseDeleted', (m) =>
      this.notices.info('Deleted.', `The downloaded copy of ${m.url} was removed; loading it again downloads it.`),
    );
    client.on('baseLoaded', (m) => {
      // A model loaded by URL is kept now (or was already): list the kept ones again.
      if (m.base.source === 'url') client.send({ type: 'listBases' });
      this.state.base = m.base;
      this.state.selected = null;
      const c = m.base.modelConfig;
      $('lora-base').textContent =
        `${m.base.name}: ${m.base.params.toLocaleString('en-US')} parameters (${c.n_layers} layers, d ${c.d_model}, ` +
        `context ${c.context_length}, ${c.vocab_size === 256 ? 'byte tokens' : `${c.vocab_size} BPE tokens`}), ` +
        `weights sha256 ${m.base.weightsSha256.slice(0, 12)}…`;
      this.update();
    });
    client.on('baseDownload', (m) => this.onDownload(m));
    client.on('adapters', (m) => {
      this.state.adapters = m.items;
      this.render();
    });
    client.on('adapterSaved', (m) => {
      $('storage-line').textContent = `Saved adapter ${m.name} (${m.id}) at step ${m.step}.`;
    });
    client.on('adapterLoaded', (m) => {
      this.state.selected = m.name;
      this.notices.info(
        `Adapter ${m.name} loaded.`,
        m.resumable ? `Paused at step ${m.step}: press Resume to train on.` : `Step ${m.step}; press "Sample both" to compare.`,
      );
      this.render();
    });
    client.on('runStarted', ({ run }) => {
      if (run.adapter) this.state.selected = run.adapter.name;
      this.update();
    });
    client.on('sampleChunk', (m) => {
      if (this.state.comparing) $(`lora-sample-${this.state.comparing}`).textContent += m.text;
    });
    client.on('sampleDone', (m) => this.onSampleDone(m));
    client.on('error', () => {
      // A refused sample ends the comparison.
      if (this.state.comparing) {
        this.state.comparing = null;
        this.update();
      }
    });
  }

  /** Whether the panel owns the sample in progress (the Generate card then ignores it). */
  get sampling() {
    return this.state.comparing != null;
  }

  setupControls() {
    $('lora-base-source').onchange = () => this.showSourceFields();
    // A GPT-2 URL is remembered, so after a reload "Load base" reads it from the browser's copy.
    const remembered = localStorage.getItem(URL_KEY);
    if (remembered) {
      $('lora-base-url').value = remembered;
      $('lora-base-source').value = 'url';
    }
    this.showSourceFields();
    $('lora-context').value = localStorage.getItem(CONTEXT_KEY) ?? '';
    $('lora-preset').onchange = (e) => {
      document.querySelectorAll('.lora-custom').forEach((el) => (el.hidden = e.target.value !== 'custom'));
    };
    $('lora-load-base').onclick = () => this.loadBase();
    $('lora-train').onclick = () => this.train();
    $('lora-compare').onclick = () => this.compare();
  }

  showSourceFields() {
    const source = $('lora-base-source').value;
    $('lora-upload-field').hidden = source !== 'upload';
    $('lora-url-field').hidden = source !== 'url';
    $('lora-files-field').hidden = source !== 'files';
  }

  /** A `baseDownload`: the file, its bytes so far, and whether it came from the browser's copy. */
  onDownload(m) {
    this.state.downloads.push(m);
    $('lora-download').hidden = false;
    const total = m.bytesTotal ?? 0;
    $('lora-download-bar').value = total > 0 ? m.bytesDone / total : 0;
    const size = (n) => `${(n / 1e6).toFixed(n < 1e6 ? 2 : 1)} MB`;
    $('lora-download-line').textContent = m.cached
      ? `${m.file}: read from this browser's copy (${size(m.bytesDone)})`
      : `Downloading ${m.file}: ${size(m.bytesDone)}${total ? ` of ${size(total)}` : ''}`;
  }

  async loadBase() {
    const source = $('lora-base-source').value;
    this.state.downloads = [];
    if (source === 'url') {
      const url = $('lora-base-url').value.trim();
      if (!url) {
        this.notices.error('badMessage', 'Give the address of a GPT-2 model folder (config.json, model.safetensors, vocab.json, merges.txt).');
        return;
      }
      // The worker resolves a relative address against its script: resolve it against the page.
      const absolute = new URL(url, location.href).href;
      localStorage.setItem(URL_KEY, url);
      this.client().send({ type: 'loadBase', source, url: absolute });
    } else if (source === 'files') {
      const picked = [...$('lora-base-files').files];
      const byName = Object.fromEntries(picked.map((f) => [f.name, f]));
      const missing = HF_FILES.filter(([name]) => !byName[name]).map(([name]) => name);
      if (missing.length) {
        this.notices.error('badMessage', `Pick the model's four files together; missing: ${missing.join(', ')}.`);
        return;
      }
      const files = {};
      for (const [name, field] of HF_FILES) files[field] = new Uint8Array(await byName[name].arrayBuffer());
      const transfer = Object.values(files).map((b) => b.buffer);
      this.client().send({ type: 'loadBase', source, files, name: byName['config.json'].webkitRelativePath || 'picked GPT-2 files' }, transfer);
    } else if (source === 'builtin') {
      this.client().send({ type: 'loadBase', source });
    } else if (source === 'checkpoint') {
      const newest = this.page.checkpoints[0];
      if (!newest) {
        this.notices.error('checkpointNotFound', 'There is no saved run yet: train one, or use the bundled base.');
        return;
      }
      this.client().send({ type: 'loadBase', source, id: newest.id });
    } else {
      const file = $('lora-base-file').files[0];
      if (!file) {
        this.notices.error('badCheckpoint', 'Choose a .safetensors file first (from "Export" or `tinygpt export`).');
        return;
      }
      const bytes = new Uint8Array(await file.arrayBuffer());
      this.client().send({ type: 'loadBase', source, bytes, name: file.name }, [bytes.buffer]);
    }
  }

  /**
   * The Context field's window in tokens (`undefined` when empty: the worker's default), or
   * `null` after saying why it is not one: a whole number from 1 to the base's context.
   */
  context() {
    const text = $('lora-context').value.trim();
    if (text === '') return undefined;
    const value = Number(text);
    const most = this.state.base?.modelConfig.context_length;
    if (Number.isInteger(value) && value >= 1 && (most === undefined || value <= most)) return value;
    const range = most === undefined ? "1 to the base's context" : `1 to ${most} (this base's context)`;
    const fallback = most === undefined ? "256, or the base's context when shorter" : Math.min(256, most);
    this.notices.error(
      'invalidConfig',
      `The context is the window an adapter trains on: give a whole number of tokens from ${range}, or leave it empty for ${fallback}.`,
    );
    return null;
  }

  train() {
    const context = this.context();
    if (context === null) return;
    if (context === undefined) localStorage.removeItem(CONTEXT_KEY);
    else localStorage.setItem(CONTEXT_KEY, String(context));
    const { dataset, transfer } = forWorker(this.page.dataset);
    const number = (id) => ($(id).value === '' ? undefined : Number($(id).value));
    const trainingConfig = { max_steps: number('lora-steps'), learning_rate: number('lora-lr') };
    if (number('lora-batch') !== undefined) trainingConfig.batch_size = number('lora-batch');
    if (number('lora-seed') !== undefined) trainingConfig.seed = number('lora-seed');
    const preset = $('lora-preset').value;
    const shape =
      preset === 'custom'
        ? {
            rank: number('lora-rank'),
            alpha: number('lora-alpha'),
            targets: $('lora-targets').value.split(',').map((t) => t.trim()).filter(Boolean),
          }
        : { preset };
    $('sample-output').textContent = '';
    this.client().send(
      {
        type: 'trainAdapter',
        name: $('lora-name').value.trim(),
        ...shape,
        trainingConfig,
        ...(context === undefined ? {} : { context }),
        dataset,
      },
      transfer,
    );
  }

  /** Samples the base alone, then base + adapter, with the same settings and seed. */
  compare() {
    const settings = this.sampleSettings();
    this.state.samples = { base: null, adapter: null };
    this.state.compareSettings = settings;
    this.startSample('base');
  }

  startSample(which) {
    this.state.comparing = which;
    $(`lora-sample-${which}`).textContent = this.state.compareSettings.prompt;
    this.client().send({ type: 'sample', ...this.state.compareSettings, adapter: which === 'adapter' });
    this.update();
  }

  onSampleDone(m) {
    const which = this.state.comparing;
    if (!which || m.cancelled) return;
    this.state.samples[which] = m.text;
    if (which === 'base') {
      this.startSample('adapter');
    } else {
      this.state.comparing = null;
      this.update();
    }
  }

  /** The adapter a sample with `adapter: true` uses: the adapter run's, else the selected one. */
  currentAdapter() {
    return this.page.run?.adapter?.name || this.state.selected;
  }

  render() {
    renderRows($('adapter-rows'), this.state.adapters, { empty: 'No adapters yet.', columns: 4 }, (a) => {
      const row = document.createElement('tr');
      row.dataset.name = a.name;
      const cells = [
        a.name,
        `rank ${a.rank}, alpha ${a.alpha}: ${a.targetModules.join(', ')}` +
          (a.context === undefined ? '' : `; windows of ${a.context} tokens`),
        `${a.baseName}${a.fitsBase ? '' : ' (not the loaded base)'}`,
      ];
      for (const [i, text] of cells.entries()) {
        const td = document.createElement('td');
        td.textContent = text;
        if (i === 0 && a.name === this.currentAdapter()) td.insertAdjacentHTML('beforeend', '<span class="tag">current</span>');
        row.append(td);
      }
      const actions = document.createElement('td');
      const button = (label, title, handler) => {
        const b = document.createElement('button');
        b.textContent = label;
        b.title = title;
        b.className = `adapter-${label.toLowerCase().split(' ')[0]}`;
        b.disabled = !this.state.base;
        b.onclick = handler;
        actions.append(b);
      };
      button('Use', 'Sample with this adapter on the loaded base', () =>
        this.client().send({ type: 'loadAdapter', name: a.name }),
      );
      button('Continue training', 'Make it the run (the Dataset card must hold the text it trained on)', () => {
        // It continues on the window it was trained on; one saved before windows were
        // recorded takes the Context field's (empty: the default).
        const context = a.context === undefined ? this.context() : undefined;
        if (context === null) return;
        const { dataset, transfer } = forWorker(this.page.dataset);
        this.client().send({ type: 'loadAdapter', name: a.name, dataset, ...(context === undefined ? {} : { context }) }, transfer);
      });
      row.append(actions);
      return row;
    });
    this.update();
  }

  update() {
    const ready = this.page.ready;
    const training = this.page.runState === 'training';
    $('lora-load-base').disabled = !ready;
    $('lora-train').disabled = !ready || !this.state.base || !this.page.dataset || training;
    $('lora-compare').disabled = !ready || !this.state.base || !this.currentAdapter() || this.sampling;
    $('lora-adapter-title').textContent = this.currentAdapter() ? `Base + ${this.currentAdapter()}` : 'Base + adapter';
  }
}
