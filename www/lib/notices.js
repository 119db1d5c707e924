// Messages for people: worker error codes in plain words, shown above the page.

const TITLES = {
  emptyDataset: 'That file is empty.',
  datasetTooShort: 'That text is too short for this model.',
  quotaExceeded: 'The browser ran out of storage space.',
  storageUnavailable: 'Browser storage did not work.',
  datasetMismatch: 'This checkpoint was trained on a different text.',
  checkpointNotFound: 'That checkpoint is gone.',
  badCheckpoint: 'That checkpoint cannot be used.',
  deleteRefused: 'That checkpoint cannot be deleted.',
  invalidConfig: 'A setting is not valid.',
  unknownPreset: 'Unknown model preset.',
  noRun: 'Nothing to do yet.',
  runFinished: 'This run is finished.',
  runLocked: 'Another tab is training this run.',
  diverged: 'Training became unstable.',
  deviceLost: 'Training on the GPU stopped.',
  badMessage: 'The worker could not read a message.',
  contextMismatch: 'This adapter trains on another window.',
  baseNotFound: 'That downloaded model is gone.',
  internal: 'Something went wrong.',
  workerCrashed: 'The training worker stopped.',
};

/** Codes after which the saved run is worth mentioning: it was not touched. */
const KEEPS_RUN = new Set(['emptyDataset', 'datasetTooShort', 'quotaExceeded', 'datasetMismatch', 'badCheckpoint']);

export class Notices {
  constructor(container) {
    this.container = container;
  }

  /** `action` ({label, run}) adds a button that does what the message suggests. */
  error(code, message, action = null) {
    const title = TITLES[code] || TITLES.internal;
    const keep = KEEPS_RUN.has(code) ? ' Your current run and saved checkpoints are unchanged.' : '';
    return this.show('error', title, `${message}${keep}`, code, action);
  }

  info(title, message) {
    this.show('info', title, message, 'info');
  }

  show(kind, title, message, code, action = null) {
    const el = document.createElement('div');
    el.className = `notice ${kind}`;
    el.dataset.code = code;
    el.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    const text = document.createElement('div');
    const strong = document.createElement('strong');
    strong.textContent = title;
    text.append(strong, ' ', message);
    const close = document.createElement('button');
    close.textContent = 'Dismiss';
    close.className = 'ghost';
    close.onclick = () => el.remove();
    if (action) {
      const act = document.createElement('button');
      act.textContent = action.label;
      act.className = 'primary';
      act.onclick = () => {
        el.remove();
        action.run();
      };
      el.append(text, act, close);
    } else {
      el.append(text, close);
    }
    this.container.prepend(el);
    while (this.container.children.length > 4) this.container.lastChild.remove();
    if (kind === 'info') setTimeout(() => el.remove(), 6000);
    return el;
  }
}
