"""A campaign: the per-shape loop over a list of shapes, resumable, on every GPU given, with its archives.

driver (run_campaign), db (the run's own bookkeeping), config (the model's), progress (the live table),
cli (the `cudal2 campaign|archive|inspect|report` commands), archive and archive_io (variants, export/import)."""
