//! `tinygpt sample`: streams generated text to stdout (from a model, or a model with a
//! LoRA adapter folded in).

use std::io::Write;

use tinygpt_model::tokenizer::Utf8Stream;
use tinygpt_model::{Gpt, Params, SampleConfig};
use tinygpt_tensor::{block_on, Backend};

use crate::args::SampleArgs;
use crate::base::{adapter_dir, load_adapter, load_base, merged_weights, BUILTIN};
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;
use crate::tokenizer;

struct Sample {
    args: SampleArgs,
    config: SampleConfig,
}

pub fn run(args: SampleArgs) -> Result<(), CliError> {
    if let (true, Some(generation)) = (is_builtin(&args.model), &args.generation) {
        return Err(CliError::Usage(format!(
            "--generation {generation}: the builtin model has no generations; give a checkpoint folder as --model to pick one"
        )));
    }
    let stop = args.stop.iter().map(|s| unescape(s)).collect::<Result<Vec<_>, _>>()?;
    let config = SampleConfig {
        max_tokens: args.tokens,
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
        stop,
        cached: !args.no_cache,
    };
    config.check().map_err(|e| CliError::Usage(format!("--{}", e.replace('_', "-"))))?;
    let compute = args.compute.clone();
    dispatch(&compute, Sample { args, config })
}

/// Whether `--model` names the builtin model (as `load_base` reads it: `builtin`, unless a
/// folder of that name exists).
fn is_builtin(model: &std::path::Path) -> bool {
    model == std::path::Path::new(BUILTIN) && !model.exists()
}

/// A `--stop` value's bytes: UTF-8, with `\n`, `\t`, `\r`, `\\` and `\xHH` escapes.
pub fn unescape(text: &str) -> Result<Vec<u8>, CliError> {
    let bad = || CliError::Usage(format!("--stop {text:?}: a backslash starts \\n, \\t, \\r, \\\\ or \\xHH"));
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next().ok_or_else(bad)? {
            'n' => out.push(b'\n'),
            't' => out.push(b'\t'),
            'r' => out.push(b'\r'),
            '\\' => out.push(b'\\'),
            'x' => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(u8::from_str_radix(&hex, 16).ok().filter(|_| hex.len() == 2).ok_or_else(bad)?);
            }
            _ => return Err(bad()),
        }
    }
    if out.is_empty() {
        return Err(CliError::Usage("--stop must not be empty".into()));
    }
    Ok(out)
}

impl WithBackend for Sample {
    type Output = ();

    fn run<B: Backend>(self, backend: B, _threads: usize) -> Result<(), CliError> {
        let Sample { args, config } = self;
        let base = load_base(&args.model, args.generation.as_deref())?;
        // With an adapter: its merge into the base, the same function as base + adapter.
        let weights = match &args.adapter {
            Some(dir) => merged_weights(&base, &load_adapter(&base, &adapter_dir(&base, dir))?)?,
            None => base.ckpt.weights.clone(),
        };
        let tokenizer = tokenizer::for_model(&base.ckpt.model_config, base.dir.as_deref())?;
        let params = Params::from_flat(&backend, &base.ckpt.model_config, &weights)?;
        let model = Gpt::new(base.ckpt.model_config, params)?;
        let mut stdout = std::io::stdout().lock();
        let mut stream = Utf8Stream::new();
        let _ = write!(stdout, "{}", args.prompt);
        // A token's bytes may end inside a character: the stream holds them until it is whole.
        block_on(model.generate_with(&tokenizer, args.prompt.as_bytes(), &config, |bytes| {
            let piece: String = bytes.iter().map(|&b| stream.push(b)).collect();
            // A closed pipe (e.g. `| head`) ends generation quietly.
            write!(stdout, "{piece}").and_then(|_| stdout.flush()).is_ok()
        }))?;
        let _ = writeln!(stdout, "{}", stream.finish());
        Ok(())
    }
}
