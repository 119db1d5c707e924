// The page: wires the controls to the worker (the npm package's WorkerClient, npm/) and renders what it
// reports. Nothing heavy runs here: training, sampling and checkpoints live in the worker.
//
// Query flags: ?backend=auto|webgpu|wasm|wasm-simd|wasm-relaxed-simd|wasm-simd-threads|wasm-relaxed-simd-threads picks the backend, ?storage=auto|opfs|idb|memory
// the checkpoint store (idb forces IndexedDB), ?preset=NAME the initial preset.

import { WorkerClient } from 'tinygpt-web';
import { backendOf, bestBuild } from './lib/builds.js';
import { LossChart } from './lib/chart.js';
import { Notices } from './lib/notices.js';
import { Settings } from './lib/settings.js';
import { renderCheckpoints } from './lib/checkpoints.js';
import { renderCapabilities } from './lib/capabilities.js';
import { LoraPanel } from './lib/lora.js';
import * as datasets from './lib/dataset.js';
import { formatBytes, formatDuration, formatLoss } from './lib/format.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

const state = {
  ready: false,
  capabilities: null,
  dataset: null,
  run: null,
  runState: 'idle',
  step: 0,
  maxSteps: 0,
  lastProgress: null,
  /** The first step reported after the run started (a resume continues at saved + 1). */
  firstProgressStep: null,
  lastSaved: null,
  checkpoints: [],
  checkpointsLoaded: false,
  sampling: false,
  offeredResume: false,
  /** Resume this run once it is loaded (after "Resume" on a checkpoint). */
  pendingResume: false,
  /** Generate text once this run is loaded (after "Sample from best"). */
  pendingSample: false,
  /** The run's lowest validation loss so far, `{loss, step}`. */
  bestVal: null,
  /** A checkpoint to load as soon as a restarted worker is ready. */
  restartFrom: null,
  persisted: false,
};

const notices = new Notices($('notices'));
const chart = new LossChart($('chart'));
const settings = new Settings({
  presetSelect: $('preset'),
  shape: $('preset-shape'),
  params: $('preset-params'),
  memory: $('preset-memory'),
  fieldsContainer: $('training-fields'),
  resetButton: $('reset-fields'),
});

let client = null;
const lora = new LoraPanel({ client: () => client, state, notices, sampleSettings });

// ---- worker ----------------------------------------------------------------------------

function startWorker(backend) {
  if (client) client.terminate();
  state.ready = false;
  $('backend').value = backend;
  client = new WorkerClient({
    backend,
    storage: params.get('storage') || 'auto',
    checked: params.has('checked'),
    // This page's own worker.js (the package's default is the copy beside the package).
    workerUrl: new URL('./worker.js', import.meta.url),
  });
  client.on('ready', onReady);
  client.on('runStarted', onRunStarted);
  client.on('progress', onProgress);
  client.on('status', (m) => setRunState(m.state, m.step));
  client.on('done', (m) => {
    const title = { finished: 'Training finished.', stopped: 'Training stopped.', earlyStopped: 'Training stopped early.' }[m.reason];
    const why = m.reason === 'earlyStopped'
      ? ' The validation loss stopped improving (early stop patience); the best checkpoint is kept.'
      : '';
    notices.info(title, `At step ${m.step}.${why}`);
  });
  client.on('sampleChunk', (m) => {
    // The LoRA panel's side-by-side samples go to its own panes.
    if (!lora.sampling) $('sample-output').textContent += m.text;
  });
  client.on('sampleDone', (m) => {
    // A cancelled sample was ended by a newer sample or a new run, which set the state.
    if (m.cancelled || lora.sampling) return;
    state.sampling = false;
    $('sample-stats').textContent = `${m.text.length} characters at ${m.tokensPerSecond.toFixed(1)} tokens/s`;
    updateButtons();
  });
  client.on('checkpointSaved', (m) => {
    state.lastSaved = { id: m.id, step: m.step };
    $('storage-line').textContent = `Saved ${m.id} at step ${m.step} (${formatBytes(m.bytes)}).`;
  });
  client.on('checkpoints', (m) => {
    state.checkpoints = m.items;
    state.checkpointsLoaded = true;
    drawCheckpoints();
    renderBest();
    offerResume();
    refreshQuota();
  });
  client.on('exported', download);
  client.on('deleted', (m) => notices.info('Deleted.', `Checkpoint ${m.id} was removed.`));
  client.on('error', (m) => {
    notices.error(m.code, m.message);
    if (m.code === 'internal' && !state.ready) setPill('error', 'Worker failed');
    if (m.code === 'datasetMismatch' || m.code === 'checkpointNotFound') {
      state.pendingResume = false;
      state.pendingSample = false;
    }
    if (m.code === 'deviceLost') offerWasm(m.message);
  });
  client.on('crashed', onCrashed);
  client.on('*', (m) => window.tinygpt.messages.push(m.type));
  // After the page's own handlers, so they see the LoRA panel's comparison as still running.
  lora.attach(client);
}

/**
 * The checkpoint a fresh worker can continue the run from: the run's last save (or the
 * newest one when there is no run), or null when none was kept in lasting storage (those
 * kept in the worker's memory, ?storage=memory, end with it). `lasting` says whether
 * storage outlives the worker.
 */
function lastCheckpoint() {
  const run = state.run;
  const savedId = state.lastSaved?.id || run?.checkpointId;
  let checkpoint = state.checkpoints.find((c) => c.id === savedId);
  if (!checkpoint && state.lastSaved && run) {
    // Saved just now: the list that names it had not arrived yet.
    const d = run.dataset;
    checkpoint = { id: state.lastSaved.id, step: state.lastSaved.step, datasetId: d.dataset_id, datasetName: d.name };
  }
  if (!checkpoint && !savedId) checkpoint = state.checkpoints[0];
  const lasting = ['opfs', 'indexeddb'].includes(state.capabilities?.storage);
  return { checkpoint: lasting ? checkpoint || null : null, lasting };
}

/**
 * The best WebAssembly build here, as `auto` would pick it without a GPU: the one to
 * continue on when the GPU fails.
 */
function wasmBackend() {
  const caps = state.capabilities;
  const best = bestBuild({ simd: caps?.simd !== false, relaxed: !!caps?.relaxedSimd, isolated: !!caps?.crossOriginIsolated });
  return backendOf(best);
}

/**
 * The GPU failed mid-run (device lost, out of GPU memory; the worker stopped training and
 * wrote nothing from the failed device): offer a WebAssembly worker that continues from
 * the last checkpoint.
 */
function offerWasm(message) {
  const { checkpoint, lasting } = lastCheckpoint();
  const backend = wasmBackend();
  // A second report of the same failure (a save after it) replaces the first.
  document.querySelectorAll('#notices .notice[data-code="deviceLost"]').forEach((el) => el.remove());
  if (checkpoint) {
    notices.error(
      'deviceLost',
      `${message} ${checkpoint.id} holds step ${checkpoint.step.toLocaleString('en-US')}.`,
      { label: `Continue on ${backend} from the last checkpoint`, run: () => restartFrom(checkpoint, backend) },
    );
  } else {
    notices.error(
      'deviceLost',
      `${message} ${lasting ? 'No checkpoint of this run was saved yet.' : 'This tab kept its checkpoints in the worker\'s memory.'}`,
      { label: `Switch to ${backend}`, run: () => { resetRun(); startWorker(backend); } },
    );
  }
}

/**
 * The worker died (an uncaught error; a wasm trap such as running out of memory): say so
 * and offer to start a fresh worker that continues from the run's last checkpoint.
 */
function onCrashed({ reason }) {
  const started = state.ready;
  const backend = $('backend').value;
  const run = state.run;
  const { checkpoint, lasting } = lastCheckpoint();
  const hadRun = !!run;
  state.ready = false;
  state.sampling = false;
  state.pendingResume = false;
  state.run = null;
  state.runState = 'idle';
  setPill('error', 'Worker stopped');
  updateButtons();
  if (!started) {
    notices.error('workerCrashed', `The worker could not start (${reason}). Try again, or choose the "wasm" backend.`, {
      label: 'Try again',
      run: () => startWorker(backend),
    });
    return;
  }
  const cause =
    `It hit an error it cannot recover from (${reason}); a model too large for the memory a browser tab ` +
    'gives WebAssembly is the usual cause.';
  if (checkpoint) {
    notices.error(
      'workerCrashed',
      `${cause} Your checkpoints are safe: ${checkpoint.id} holds step ${checkpoint.step.toLocaleString('en-US')}` +
        `${hadRun ? ', so only the steps after it are lost' : ''}.`,
      { label: 'Restart from the last checkpoint', run: () => restartFrom(checkpoint, backend) },
    );
  } else {
    notices.error(
      'workerCrashed',
      `${cause} ${
        !hadRun ? '' : lasting ? 'No checkpoint of this run was saved yet, so it is lost. ' : 'This tab kept its checkpoints in the worker\'s memory, so the run is lost. '
      }Restart the worker and try a smaller preset.`,
      { label: 'Restart the worker', run: () => startWorker(backend) },
    );
  }
}

/** A fresh worker that loads `checkpoint` and resumes training once it is ready. */
function restartFrom(checkpoint, backend) {
  state.restartFrom = checkpoint;
  startWorker(backend);
}

function onReady(m) {
  state.ready = true;
  state.capabilities = m.capabilities;
  if (!settings.presets.length) {
    const gpuLimits = m.capabilities?.webgpu?.limits;
    settings.configure(m.presets, m.defaultTrainingConfig, params.get('preset') || 'tiny', gpuLimits);
  }
  settings.allowMixed(m.capabilities?.backend === 'webgpu');
  renderCapabilities(m.capabilities, state.persisted);
  setPill('idle', 'Ready');
  client.send({ type: 'listCheckpoints' });
  updateButtons();
  const restart = state.restartFrom;
  state.restartFrom = null;
  if (restart) resumeCheckpoint(restart);
}

function onRunStarted({ run }) {
  state.run = run;
  state.step = run.step;
  state.maxSteps = run.maxSteps;
  state.lastProgress = null;
  state.firstProgressStep = null;
  // A new run ends any sample in progress (the worker cancels it).
  state.sampling = false;
  chart.clear();
  chart.add(run.history);
  state.bestVal = null;
  noteBest(run.history);
  renderBestLoss();
  $('resume-banner').hidden = true;
  const last = run.history[run.history.length - 1];
  $('stat-train').textContent = formatLoss(last?.trainLoss);
  $('stat-val').textContent = formatLoss(last?.valLoss);
  $('stat-tps').textContent = '—';
  $('stat-eta').textContent = '—';
  renderStep();
  updateButtons();
  drawCheckpoints();
  if (state.pendingSample) {
    state.pendingSample = false;
    generate();
  }
  if (state.pendingResume) {
    state.pendingResume = false;
    if (run.step >= run.maxSteps) {
      notices.info('This run is finished.', `It trained all ${run.maxSteps.toLocaleString('en-US')} of its steps: generate text with it, or train a new run.`);
    } else {
      client.send({ type: 'resume' });
    }
  }
}

function onProgress(p) {
  if (state.firstProgressStep == null && p.points.length) state.firstProgressStep = p.points[0].step;
  state.step = p.step;
  state.maxSteps = p.maxSteps;
  state.lastProgress = p;
  chart.add(p.points);
  noteBest(p.points);
  if (!progressRender) progressRender = setTimeout(renderProgress, PROGRESS_RENDER_MS);
}

/**
 * How often, at most, the page repaints the progress figures while a run reports. A step of
 * `small` reports about 30 times a second; every repaint is layout, paint and compositing on
 * the machine's cores, which the worker's threads need (in headless Chromium on a 2-core VM,
 * where both are on the CPU, the threads build ran 6-32% faster at `medium` with these
 * repaints throttled; docs/benchmarks-log.md).
 */
const PROGRESS_RENDER_MS = 250;
let progressRender = null;

/** Writes the latest progress into the stats and the step line (see `onProgress`). */
function renderProgress() {
  clearTimeout(progressRender);
  progressRender = null;
  const p = state.lastProgress;
  if (p) {
    $('stat-train').textContent = formatLoss(p.trainLoss);
    $('stat-val').textContent = formatLoss(p.valLoss);
    if (p.tokensPerSecond > 0) $('stat-tps').textContent = Math.round(p.tokensPerSecond).toLocaleString('en-US');
    $('stat-eta').textContent = p.step >= p.maxSteps ? 'done' : formatDuration(p.etaSeconds);
  }
  renderBestLoss();
  renderStep();
}

/** Keeps the run's lowest validation loss (and its step) from loss points. */
function noteBest(points) {
  for (const p of points) {
    if (p.valLoss != null && (state.bestVal == null || p.valLoss < state.bestVal.loss)) {
      state.bestVal = { loss: p.valLoss, step: p.step };
    }
  }
}

function renderBestLoss() {
  $('stat-best').textContent = state.bestVal
    ? `${formatLoss(state.bestVal.loss)} @ ${state.bestVal.step.toLocaleString('en-US')}`
    : '—';
}

/** The best checkpoint of the store (best.json's generation), offered for sampling and export. */
function bestCheckpoint() {
  return state.checkpoints.find((c) => c.best);
}

function renderBest() {
  const best = bestCheckpoint();
  $('best-line').hidden = !best;
  if (!best) return;
  $('best-text').textContent =
    `Best checkpoint: ${best.id} (step ${best.step.toLocaleString('en-US')}, ${best.modelName}).`;
  updateButtons();
}

function renderStep() {
  $('stat-step').textContent = `${state.step.toLocaleString('en-US')} of ${state.maxSteps.toLocaleString('en-US')}`;
  $('progress-bar').style.width = state.maxSteps ? `${(100 * state.step) / state.maxSteps}%` : '0';
}

function setRunState(runState, step) {
  state.runState = runState;
  if (step !== undefined) state.step = step;
  // A pause or the end shows the figures it stopped at, not those of a quarter second before.
  if (progressRender) renderProgress();
  const label = { training: 'Training', paused: 'Paused', finished: 'Finished', stopped: 'Stopped' }[runState];
  setPill({ training: 'training', paused: 'paused' }[runState] || 'done', label);
  renderStep();
  updateButtons();
}

function setPill(kind, text) {
  const pill = $('status-pill');
  pill.className = `pill pill-${kind}`;
  pill.textContent = text;
}

function updateButtons() {
  const s = state.runState;
  const hasRun = !!state.run;
  $('train').disabled = !state.ready || !state.dataset || s === 'training';
  $('train').textContent = hasRun ? 'Train new run' : 'Train';
  $('pause').disabled = s !== 'training';
  $('resume').disabled = !(s === 'paused' || s === 'stopped');
  $('stop').disabled = !(s === 'training' || s === 'paused');
  $('generate').disabled = !hasRun || state.sampling;
  // Sampling from the best loads it in place of the current run: not while that one trains.
  $('sample-best').disabled = !bestCheckpoint() || s === 'training';
  $('sample-best').title = s === 'training' ? 'Pause or stop training first: the best checkpoint replaces this run.' : '';
  $('save-now').disabled = !hasRun;
  lora.update();
}

/** Storage use changes with every save; the page can ask the browser directly. */
async function refreshQuota() {
  if (!navigator.storage?.estimate) return;
  try {
    const { usage, quota } = await navigator.storage.estimate();
    $('cap-quota').textContent = `${formatBytes(usage)} used of ${formatBytes(quota)}`;
  } catch {
    // Keep what the worker reported.
  }
}

// ---- dataset ---------------------------------------------------------------------------

function showDataset(d) {
  state.dataset = d;
  $('dataset-name').textContent = d.builtIn ? `${d.name} (built in)` : d.name;
  $('dataset-size').textContent = `${formatBytes(d.bytes.length)} (${d.bytes.length.toLocaleString('en-US')} bytes)`;
  $('dataset-id').textContent = d.id;
  $('dataset-preview').textContent = new TextDecoder().decode(d.bytes.subarray(0, 400));
  updateButtons();
}

async function useFile(file) {
  if (!file) return;
  const d = await datasets.fromFile(file);
  if (d.bytes.length === 0) {
    // Refused here, before anything is replaced: the current dataset and run stay.
    notices.error('emptyDataset', `"${file.name}" has no text in it: choose a file with some text.`);
    return;
  }
  showDataset(d);
  datasets.remember(d);
  notices.info('Dataset loaded.', `${d.name}, ${formatBytes(d.bytes.length)}. Press Train to use it.`);
}

function setupDataset() {
  const zone = $('drop-zone');
  $('file-input').onchange = (e) => {
    useFile(e.target.files[0]);
    e.target.value = '';
  };
  zone.ondragover = (e) => {
    e.preventDefault();
    zone.classList.add('dragging');
  };
  zone.ondragleave = () => zone.classList.remove('dragging');
  zone.ondrop = (e) => {
    e.preventDefault();
    zone.classList.remove('dragging');
    useFile(e.dataTransfer.files[0]);
  };
  $('use-default').onclick = async () => showDataset(await datasets.loadDefault());
}

/** The text a checkpoint trained on: the current one, the built-in one or a cached upload. */
async function datasetFor(item) {
  if (state.dataset && state.dataset.id === item.datasetId) return state.dataset;
  const builtIn = await datasets.loadDefault();
  if (builtIn.id === item.datasetId) return builtIn;
  return datasets.recall(item.datasetId);
}

// ---- actions ---------------------------------------------------------------------------

function train() {
  const { dataset, transfer } = datasets.forWorker(state.dataset);
  $('sample-output').textContent = '';
  client.send(
    {
      type: 'train',
      preset: settings.preset.name,
      // The preset's model with the dropout of the advanced settings (the batch stays the preset's).
      modelConfig: settings.modelConfig(),
      trainingConfig: settings.trainingConfig(),
      dataset,
    },
    transfer,
  );
}

async function resumeCheckpoint(item) {
  const d = await datasetFor(item);
  if (!d) {
    notices.error(
      'datasetMismatch',
      `Checkpoint ${item.id} was trained on "${item.datasetName}". Upload that file, then press Resume on the checkpoint.`,
    );
    return;
  }
  showDataset(d);
  state.pendingResume = true;
  const { dataset, transfer } = datasets.forWorker(d);
  client.send({ type: 'load', id: item.id, dataset }, transfer);
}

/** Loads the best checkpoint (paused, in place of the current run) and generates from it. */
async function sampleBest() {
  const best = bestCheckpoint();
  if (!best) return;
  const d = await datasetFor(best);
  if (!d) {
    notices.error('datasetMismatch', `Checkpoint ${best.id} was trained on "${best.datasetName}". Upload that file first.`);
    return;
  }
  showDataset(d);
  state.pendingSample = true;
  const { dataset, transfer } = datasets.forWorker(d);
  client.send({ type: 'load', id: best.id, dataset }, transfer);
}

function download(m) {
  const url = URL.createObjectURL(new Blob([m.bytes], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = m.fileName;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function drawCheckpoints() {
  renderCheckpoints($('checkpoint-rows'), state.checkpoints, {
    currentId: state.run?.checkpointId,
    onResume: resumeCheckpoint,
    onDownload: (item) => client.send({ type: 'export', id: item.id }),
    onDelete: (item) => {
      if (confirm(`Delete checkpoint ${item.id} (step ${item.step})?`)) client.send({ type: 'delete', id: item.id });
    },
  });
}

function offerResume() {
  const latest = state.checkpoints[0];
  if (state.offeredResume || state.run || !latest) return;
  state.offeredResume = true;
  $('resume-text').textContent =
    `${latest.modelName} on ${latest.datasetName}, saved at step ${latest.step.toLocaleString('en-US')} of ` +
    `${latest.maxSteps.toLocaleString('en-US')}.`;
  $('resume-banner').hidden = false;
  $('resume-last').onclick = () => resumeCheckpoint(latest);
}

/** The Generate card's sampling settings (a `sample` message's fields). */
function sampleSettings() {
  return {
    prompt: $('prompt').value,
    maxTokens: Math.max(1, Math.round(Number($('length').value))),
    temperature: Number($('temperature').value),
    topK: Math.max(0, Math.round(Number($('top-k').value))),
    topP: Number($('top-p').value) || 1,
    seed: $('seed').value === '' ? Math.floor(Math.random() * 2 ** 32) : Math.max(0, Math.round(Number($('seed').value))),
    // One stop sequence; `\n` and `\t` in the field stand for a newline and a tab.
    stop: $('stop').value === '' ? [] : [$('stop').value.replaceAll('\\n', '\n').replaceAll('\\t', '\t')],
  };
}

function generate() {
  state.sampling = true;
  $('sample-output').textContent = $('prompt').value;
  $('sample-stats').textContent = 'Sampling…';
  client.send({ type: 'sample', ...sampleSettings() });
  updateButtons();
}

function setupControls() {
  $('train').onclick = train;
  $('pause').onclick = () => client.send({ type: 'pause' });
  $('resume').onclick = () => client.send({ type: 'resume' });
  $('stop').onclick = () => client.send({ type: 'stop' });
  $('generate').onclick = generate;
  $('save-now').onclick = () => client.send({ type: 'save' });
  $('sample-best').onclick = sampleBest;
  $('export-best').onclick = () => {
    const best = bestCheckpoint();
    if (best) client.send({ type: 'export', id: best.id });
  };
  $('resume-dismiss').onclick = () => ($('resume-banner').hidden = true);
  $('upload-ckpt').onchange = async (e) => {
    const file = e.target.files[0];
    e.target.value = '';
    if (!file) return;
    const bytes = new Uint8Array(await file.arrayBuffer());
    client.send({ type: 'import', bytes }, [bytes.buffer]);
  };
  $('backend').onchange = (e) => {
    if (state.runState === 'training' && !confirm('Switching the backend restarts the worker and ends this run (saved checkpoints stay). Continue?')) {
      e.target.value = state.capabilities?.backend || 'auto';
      return;
    }
    resetRun();
    startWorker(e.target.value);
  };
}

function resetRun() {
  state.run = null;
  state.runState = 'idle';
  state.step = 0;
  state.maxSteps = 0;
  chart.clear();
  renderStep();
  updateButtons();
}

async function main() {
  window.tinygpt = { state, chart, lora, messages: [], get client() { return client; } };
  setupDataset();
  setupControls();
  if (navigator.storage && navigator.storage.persist) {
    try {
      state.persisted = (await navigator.storage.persisted()) || (await navigator.storage.persist());
    } catch {
      state.persisted = false;
    }
  }
  startWorker(params.get('backend') || 'auto');
  try {
    showDataset(await datasets.loadDefault());
  } catch (e) {
    notices.error('internal', `${e.message}. Upload a .txt file to train on.`);
  }
}

main();
