// The example page: the npm package tinygpt-web, installed from its tarball (package.json),
// imported through the import map in index.html. `cargo xtask serve --example` serves it
// with the COOP/COEP headers the threads build needs; tests-web/npm.test.mjs drives it.
import { TinyGPT } from 'tinygpt-web';

const $ = (id) => document.getElementById(id);
const text = `To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them. To die: to sleep;
No more; and by a sleep to say we end
The heart-ache and the thousand natural shocks
That flesh is heir to.
`.repeat(20);

const backend = new URLSearchParams(location.search).get('backend') || 'auto';
const model = await TinyGPT.create({ backend });
model.on('error', (e) => ($('status').textContent = `${e.code}: ${e.message}`));
$('status').textContent = `Ready: training on ${model.capabilities.backend}.`;

$('train').onclick = async () => {
  await model.train({ preset: 'tiny', dataset: { name: 'hamlet.txt', text }, trainingConfig: { max_steps: 300 } });
  $('status').textContent = 'Training.';
  for await (const p of model.progress()) {
    $('progress').textContent = `Step ${p.step} of ${p.maxSteps}, loss ${p.trainLoss.toFixed(3)}`;
  }
};

$('pause').onclick = async () => {
  const { step } = await model.pause();
  $('status').textContent = `Paused at step ${step}.`;
};

$('sample').onclick = async () => {
  $('sample-output').textContent = '';
  const sample = model.sample({ prompt: 'To be', maxTokens: 120, temperature: 0.8 });
  for await (const chunk of sample) $('sample-output').textContent += chunk;
  $('sample-stats').textContent = `${(await sample.done).tokensPerSecond.toFixed(0)} tokens/s`;
};

$('save').onclick = async () => {
  await model.save();
  const items = (await model.listCheckpoints()).map((c) => `${c.id}: step ${c.step} of ${c.modelName}`);
  $('checkpoints').replaceChildren(...items.map((t) => Object.assign(document.createElement('li'), { textContent: t })));
};

for (const button of document.querySelectorAll('button')) button.disabled = false;
window.example = { model, text };
