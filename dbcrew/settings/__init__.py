"""Settings, one module per concern; each name has one home, imported from it.

- `environment`: every `DBCREW_*` variable (`Environment`, `environment()`, `debugging()`), the one
  module that reads them; `llm` the LLM endpoint's variables and `Capability`.
- `paths`: where a worker writes (reports, caches) and how much it keeps, from the environment.
- `run`: what one run may do (`Settings`, `Ablations`, `Machine`), a flow parameter.
- `thresholds`: the health checks' levels (`Thresholds`); `diagnosis` the diagnosis experts'
  (`DiagnosisThresholds`, nested in it); `bounds` what any threshold may be; `overrides` the
  `--threshold NAME=VALUE` a run is given.
- `configuration_page`: docs/configuration.md, rendered from `Environment`
  (`python -m dbcrew.settings > docs/configuration.md`); `in_words` a field's type and default in words.

Why the default levels are what they are: the "Why these levels" sections of docs/review.md and
docs/diagnose.md.
"""
