"""The survey: every transformers causal-LM and image-text-to-text model type, built tiny, run and measured on
the generic parts (`run` the command and its cache, `shrink` the tiny config, `tree` where the parts sit,
`measure` what resolves and holds, `page` the Coverage page)."""
