"""The articulated body: :mod:`.robot` (Robot from a URDF, URDF/MJCF out), :mod:`.load` (``load_robot`` for every
kind of robot spec), :mod:`.skeletons` (built-in creatures), :mod:`.kinematics` (batched torch FK), :mod:`.legs`
(legs and feet), :mod:`.spatial` (the rotation helpers, numpy and torch)."""
