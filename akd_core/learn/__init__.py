"""Policies trained on tracked motion, and how they are judged and deployed.

:mod:`.dataset` (demos + their references from an exported HDF5), :mod:`.reference` (a clip continued past its end),
:mod:`.observation` (what a policy sees: measurable quantities + the reference), :mod:`.policy` (the MLP, its file,
the supervised fit), :mod:`.bc` (behaviour cloning), :mod:`.env` (the randomised MuJoCo world), :mod:`.expert` (the
tracker's planner as a warm-started MPC expert), :mod:`.dagger` (DAgger with that expert), :mod:`.evaluate`
(episodes with pushes, friction and mass changes), :mod:`.onnx_export` (ONNX + metadata, onnxruntime runner),
:mod:`.video`. Velocity-command policies: :mod:`.command` (the command box, the gait clock, command schedules),
:mod:`.motion_library` (a library's frames, motion matching, gait style), :mod:`.velocity` (data, BC and PPO),
:mod:`.velocity_env` (the command-following worlds and their reward), :mod:`.amp` (the AMP discriminator),
:mod:`.velocity_eval` (command tracking under disturbances)."""
