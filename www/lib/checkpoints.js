// The checkpoint list: one row per saved generation, newest first.

import { formatBytes, formatLoss } from './format.js';
import { renderRows } from './rows.js';

export function renderCheckpoints(tbody, items, { onResume, onDownload, onDelete, currentId }) {
  renderRows(tbody, items, { empty: 'No checkpoints yet.', columns: 7 }, (item, i) => {
    const row = document.createElement('tr');
    row.dataset.id = item.id;
    const cells = [
      item.id,
      `${item.step.toLocaleString('en-US')} / ${item.maxSteps.toLocaleString('en-US')}`,
      formatBytes(item.bytes),
      item.modelName,
      item.datasetName,
      formatLoss(item.bestValLoss),
    ];
    for (const [c, text] of cells.entries()) {
      const td = document.createElement('td');
      td.textContent = text;
      if (c === 0 && i === 0) td.insertAdjacentHTML('beforeend', '<span class="tag">latest</span>');
      if (c === 0 && item.id === currentId) td.insertAdjacentHTML('beforeend', '<span class="tag">current</span>');
      // The generation with the lowest validation loss at its own step (kept however old).
      if (c === 0 && item.best) td.insertAdjacentHTML('beforeend', '<span class="tag">best</span>');
      row.append(td);
    }
    const actions = document.createElement('td');
    const button = (label, handler, cls = '') => {
      const b = document.createElement('button');
      b.textContent = label;
      b.className = cls;
      b.onclick = () => handler(item);
      actions.append(b);
      return b;
    };
    button('Resume', onResume);
    button('Download', onDownload);
    const del = button('Delete', onDelete, 'danger');
    if (i === 0) {
      // The store keeps the latest generation: it is what "Resume last run" loads.
      del.disabled = true;
      del.title = 'The latest checkpoint cannot be deleted; save a newer one first.';
    }
    row.append(actions);
    return row;
  });
}
