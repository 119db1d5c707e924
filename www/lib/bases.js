// The GPT-2 folders the worker keeps in browser storage after a load by URL: one row per
// folder with its size, when it was downloaded, and a delete button (`deleteBase`). A
// download cut short while it was being written (`complete: false`: the tab closed) is
// listed too, tagged "incomplete download": it is never read, so its only use here is the
// Delete button that frees the space it takes.

import { formatBytes } from './format.js';
import { renderRows } from './rows.js';

export function renderBases(tbody, items, { onDelete }) {
  renderRows(tbody, items, { empty: 'No downloaded models.', columns: 4 }, (item) => {
    const row = document.createElement('tr');
    row.dataset.url = item.url;
    row.classList.toggle('incomplete', !item.complete);
    const when = item.fetchedMs == null ? '—' : new Date(item.fetchedMs).toLocaleString();
    for (const text of [item.url, formatBytes(item.bytes), when]) {
      const td = document.createElement('td');
      td.textContent = text;
      row.append(td);
    }
    if (!item.complete) row.cells[0].insertAdjacentHTML('beforeend', '<span class="tag">incomplete download</span>');
    const actions = document.createElement('td');
    const del = document.createElement('button');
    del.textContent = 'Delete';
    del.className = 'danger base-delete';
    del.title = item.complete
      ? 'Remove the downloaded copy from this browser; loading it again downloads it. A loaded model stays loaded.'
      : 'Free the space this download, cut short, takes; it is never used. Loading the model downloads it whole.';
    del.onclick = () => onDelete(item);
    actions.append(del);
    row.append(actions);
    return row;
  });
}
