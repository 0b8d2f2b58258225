"""Score Distillation Sampling: :mod:`.distill` (`akd distill`), :mod:`.clip_render` (the optimised clip and its
Gaussian-splat renderer), :mod:`.phase` (leg-phase parametrisation), :mod:`.prior` (video priors and their
training). Never imports :mod:`akd_core.physics` (and the reverse)."""
