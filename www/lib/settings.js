// The model preset picker and the advanced training fields. Defaults come from the worker's
// `ready` message (TrainingConfig::default() and the presets), so the page shows exactly
// the documented defaults; batch_size defaults to the preset's.

import { formatBytes, formatCount } from './format.js';

/** [field, label, kind, hint] in training_config.json's names. */
const FIELDS = [
  ['max_steps', 'Steps', 'int', 'optimizer steps in the run'],
  ['batch_size', 'Batch size', 'int', 'sequences per step (preset default)'],
  ['learning_rate', 'Learning rate', 'float', 'peak, after warm-up'],
  ['schedule', 'Schedule', ['cosine', 'constant'], 'after warm-up'],
  ['warmup_steps', 'Warm-up steps', 'int', 'linear ramp from 0'],
  ['min_lr', 'Min learning rate', 'float', 'end of the cosine'],
  ['weight_decay', 'Weight decay', 'float', 'matrices only'],
  ['grad_clip', 'Gradient clip', 'float', 'global norm; 0 = off'],
  ['beta1', 'AdamW β1', 'float', ''],
  ['beta2', 'AdamW β2', 'float', ''],
  ['eval_interval', 'Eval interval', 'int', 'steps between val losses'],
  ['eval_batches', 'Eval batches', 'int', 'batches per val loss'],
  ['checkpoint_interval', 'Checkpoint interval', 'int', 'steps between saves'],
  ['early_stop_patience', 'Early stop patience', 'int', 'stop after this many val losses without a new best; 0 = off'],
  ['seed', 'Seed', 'int', 'weights and batches'],
  ['precision', 'Precision', ['f32', 'mixed'], 'matmuls: mixed = f16 inputs, f32 sums, loss scaling (WebGPU only)'],
];

/** Fields whose default the worker's `defaultTrainingConfig` leaves out (written only when not the default). */
const IMPLICIT = { precision: 'f32' };

export class Settings {
  constructor({ presetSelect, shape, params, memory, fieldsContainer, resetButton }) {
    Object.assign(this, { presetSelect, shape, params, memory, fieldsContainer });
    this.presets = [];
    this.defaults = null;
    this.inputs = new Map();
    presetSelect.onchange = () => this.showPreset();
    resetButton.onclick = () => this.fillDefaults();
  }

  /**
   * From the `ready` message. `gpuLimits` (capabilities.webgpu.limits, when the browser has an
   * adapter) are shown beside the memory estimate: one tensor must fit one storage binding.
   */
  configure(presets, defaults, initialPreset = 'tiny', gpuLimits = null) {
    this.presets = presets;
    this.gpuLimits = gpuLimits;
    this.defaults = defaults;
    this.presetSelect.replaceChildren(
      ...presets.map((p) => {
        const option = document.createElement('option');
        option.value = p.name;
        option.textContent = `${p.name} · ${formatCount(p.params)} params · ~${formatBytes(p.memoryBytes)}`;
        return option;
      }),
    );
    if (presets.some((p) => p.name === initialPreset)) this.presetSelect.value = initialPreset;
    this.buildFields();
    this.showPreset();
  }

  /**
   * Mixed precision trains on WebGPU only (the WASM builds have no f16 matmul): the choice is
   * enabled only there, and falls back to f32 elsewhere. Called on every `ready`.
   */
  allowMixed(allowed) {
    this.mixedAllowed = allowed;
    const input = this.inputs.get('precision');
    if (!input) return;
    input.disabled = !allowed;
    input.title = allowed ? '' : 'mixed precision needs the WebGPU backend';
    if (!allowed) input.value = 'f32';
  }

  get preset() {
    return this.presets.find((p) => p.name === this.presetSelect.value);
  }

  showPreset() {
    const p = this.preset;
    if (!p) return;
    const m = p.modelConfig;
    this.shape.textContent = `${m.n_layers} layers · d ${m.d_model} · ${m.n_heads} heads · context ${m.context_length}`;
    this.params.textContent = p.params.toLocaleString('en-US');
    const l = this.gpuLimits;
    // The optimizer's flat buffers shard across bindings; a single tensor must fit one.
    const gpu = l?.maxStorageBufferBindingSize
      ? ` · WebGPU: each tensor ≤ ${formatBytes(l.maxStorageBufferBindingSize)} (binding), ` +
        `buffers ≤ ${formatBytes(l.maxBufferSize)}`
      : '';
    this.memory.textContent = `≈ ${formatBytes(p.memoryBytes)} to train (batch ${p.batchSize})${gpu}`;
    const batch = this.inputs.get('batch_size');
    if (batch && !batch.dataset.edited) batch.value = p.batchSize;
  }

  buildFields() {
    this.fieldsContainer.replaceChildren();
    this.inputs.clear();
    // The model's dropout (model_config.json), the one model field the page lets you set.
    this.dropoutInput = this.field('Dropout', 'float', 'training only; 0 ≤ p < 1 (nanoGPT: 0.2)', 'dropout');
    this.dropoutInput.max = '0.95';
    this.dropoutInput.step = '0.05';
    for (const [name, label, kind, hint] of FIELDS) {
      this.inputs.set(name, this.field(label, kind, hint, name));
    }
    this.fillDefaults();
  }

  /** One labelled input (a select for a list of choices) appended to the fields. */
  field(label, kind, hint, name) {
    const wrap = document.createElement('label');
    wrap.className = 'field';
    wrap.textContent = label;
    let input;
    if (Array.isArray(kind)) {
      input = document.createElement('select');
      for (const v of kind) input.append(new Option(v, v));
    } else {
      input = document.createElement('input');
      input.type = 'number';
      input.step = kind === 'int' ? '1' : 'any';
      input.min = '0';
    }
    input.name = name;
    input.dataset.kind = Array.isArray(kind) ? 'choice' : kind;
    input.oninput = () => { input.dataset.edited = '1'; };
    const small = document.createElement('span');
    small.className = 'hint';
    small.textContent = hint;
    wrap.append(input, small);
    this.fieldsContainer.append(wrap);
    return input;
  }

  fillDefaults() {
    for (const [name, input] of this.inputs) {
      delete input.dataset.edited;
      // early_stop_patience is absent from the defaults: off, shown as 0.
      input.value = name === 'batch_size' && this.preset ? this.preset.batchSize : (this.defaults[name] ?? IMPLICIT[name] ?? 0);
    }
    this.dropoutInput.value = this.preset ? this.preset.modelConfig.dropout : 0;
  }

  /** The dropout probability the advanced settings ask for. */
  dropout() {
    return Number(this.dropoutInput.value) || 0;
  }

  /** The model_config.json of a new run: the preset's, with the dropout asked for. */
  modelConfig() {
    return { ...this.preset.modelConfig, dropout: this.dropout() };
  }

  /** The training_config.json the `train` message carries. */
  trainingConfig() {
    const config = {};
    for (const [name, input] of this.inputs) {
      const kind = input.dataset.kind;
      if (kind === 'choice') config[name] = input.value;
      else if (kind === 'int') config[name] = Math.round(Number(input.value));
      else config[name] = Number(input.value);
    }
    return config;
  }

  /** Sets fields from a saved run's config (after a resume). */
  show(trainingConfig, presetName) {
    if (presetName && this.presets.some((p) => p.name === presetName)) {
      this.presetSelect.value = presetName;
      this.showPreset();
    }
    for (const [name, input] of this.inputs) {
      if (trainingConfig[name] !== undefined) input.value = trainingConfig[name] ?? 0;
      else if (name in IMPLICIT) input.value = IMPLICIT[name];
    }
    this.allowMixed(this.mixedAllowed);
  }
}
