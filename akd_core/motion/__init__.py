"""Kinematic clips and where they come from: :mod:`.clip` (Motion, TrackedMotion), :mod:`.gait` (the procedural
gait library), :mod:`.prompt` (text -> GaitSpec), :mod:`.stage` (`akd gait`), :mod:`.zmp` (biped balance),
:mod:`.feasibility`, :mod:`.metrics` and :mod:`.classify` (which gait a clip is)."""
