"""The library feedforward of a residual velocity-command policy (``akd train-policy LIBRARY --task velocity
--action residual``): a policy modulating a trajectory generator (PMTG, Iscen et al. 2018), the trajectory generator
being the motion library itself, as a motion-matching controller plays it.

At every control period the feedforward is the kernel-weighted mean (Nadaraya-Watson) of the library frames' next PD
targets (the tracked clips' executed targets, ``actions[k + 1]`` of frame k), weighted by how near each frame's
(command, gait phase) is to the robot's (its command, its gait clock):

    key(c, phase) = [vx / 0.1, vy / 0.1, yaw_rate / 0.2, g(c) sin(phase) / 0.25, g(c) cos(phase) / 0.25]
    w_m = softmax_m(key(c, phase) . key_m - |key_m|^2 / 2)          (= softmax of -|key - key_m|^2 / 2)
    feedforward = sum_m w_m target_m

with ``g(c) = clip(max |c_i| / 0.1, 0, 1)``: a command asking to stand (the gait clock stops, the library's stands
have a held phase) matches the library's stands whatever the phase, and the phase's weight grows smoothly as the
command moves off zero. The weights change smoothly with the command, so the feedforward blends neighbouring gaits
when the command lies between the library's and changes without a jump when the command does (but for the clock's
own step). The gait clock advances at the library's stride frequency for the command
(:class:`~akd_core.learn.command.GaitClock`), so at zero residual the robot steps roughly as the library does at
that command; the policy only adds a bounded residual ``bound * tanh(u)`` (rad) for balance and velocity correction.

**Steering** (``--steer VX,VY,YAW``, off by default): the policy also chooses where in the library to look. Three
more action components shift the command the table is queried at, ``c + steer * tanh(u)`` (the policy's command
slot is unchanged), so that one output turns the library's own lateral or turning steps on, where a push asks for
them, instead of a dozen joint residuals the policy would have to time itself: a Raibert-style correction of the
foot placement, made of the gaits the library already holds.

Everything is a function of the observation's ``command`` and ``clock`` slots and of the table's buffers (M frames:
keys (M, 5), targets (M, J)), so it lives inside the policy's graph: the ONNX export carries the table as
initializers and computes the same thing (:func:`akd_core.learn.onnx_export.build_onnx`); whoever runs the policy
needs nothing of the library.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from akd_core.learn.observation import observation_slices, velocity_observation_layout

FF_COMMAND_SCALE = (0.1, 0.1, 0.2)  # m/s, m/s, rad/s: a command this far off weighs as a phase FF_PHASE_SCALE off
FF_PHASE_SCALE = 0.25  # rad
FF_MOVING_RAMP = 0.1  # m/s or rad/s: the phase counts fully from this |command| on
RESIDUAL_BOUND_RAD = 0.3  # the residual's bound, rad per joint
STEER_DIMS = 3  # steering components of a steering policy's action: vx, vy, yaw rate
FF_CHUNK = 1024  # observations per weight matrix (1024 x frames floats: 82 MB for a 20040-frame library)


def feedforward_keys(command: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """(N, 5) the kernel's keys of commands (N, 3) and gait phases (N,) (module docstring)."""
    c = np.asarray(command, np.float64)
    gate = np.clip(np.abs(c).max(-1) / FF_MOVING_RAMP, 0.0, 1.0)[:, None]
    phase = np.asarray(phase, np.float64)
    clock = np.stack([np.sin(phase), np.cos(phase)], -1)
    return np.concatenate([c / np.asarray(FF_COMMAND_SCALE), gate * clock / FF_PHASE_SCALE], 1).astype(np.float32)


class LibraryFeedforward(nn.Module):
    """PD-target feedforward (N, J) from raw velocity observations (N, 3J + 11) (module docstring); with ``steer``
    the table is queried at the observation's command shifted by a steering offset (N, 3)."""

    def __init__(self, num_joints: int, frames: int, steer: bool = False):
        super().__init__()
        self.steer_dims = STEER_DIMS if steer else 0
        if steer:  # m/s, m/s, rad/s: the largest shift of each command component
            self.register_buffer("steer_bound", torch.zeros(STEER_DIMS))
        slices = observation_slices(velocity_observation_layout(num_joints))
        self.command_slice, self.clock_slice = slices["command"], slices["clock"]
        self.register_buffer("keys", torch.zeros(frames, 5))
        self.register_buffer("half_key_sq", torch.zeros(frames))
        self.register_buffer("targets", torch.zeros(frames, num_joints))
        self.register_buffer("command_scale", torch.as_tensor(FF_COMMAND_SCALE, dtype=torch.float32))
        self.register_buffer("bound", torch.full((num_joints,), RESIDUAL_BOUND_RAD))

    @classmethod
    def from_table(cls, command: np.ndarray, phase: np.ndarray, targets: np.ndarray,
                   bound: float = RESIDUAL_BOUND_RAD, steer: tuple[float, float, float] | None = None
                   ) -> LibraryFeedforward:
        """From the library frames' commands (M, 3), gait phases (M,) and next PD targets (M, J); ``steer``: the
        steering bounds (m/s, m/s, rad/s), or None for none."""
        ff = cls(targets.shape[1], len(targets), steer=steer is not None)
        if steer is not None:
            ff.steer_bound.copy_(torch.as_tensor(np.asarray(steer, np.float32)))
        keys = torch.as_tensor(feedforward_keys(command, phase))
        ff.keys.copy_(keys)
        ff.half_key_sq.copy_(0.5 * (keys ** 2).sum(1))
        ff.targets.copy_(torch.as_tensor(np.asarray(targets, np.float32)))
        ff.bound.fill_(float(bound))
        return ff

    def steering(self, action: torch.Tensor) -> torch.Tensor:
        """(N, 3) the command offsets of the steering components (N, 3) of an action (pre-tanh)."""
        return self.steer_bound * torch.tanh(action)

    def query(self, obs: torch.Tensor, offset: torch.Tensor | None = None) -> torch.Tensor:
        """(N, 5) the keys of the observations' command (shifted by ``offset`` (N, 3)) and clock."""
        command = obs[:, self.command_slice]
        if offset is not None:
            command = command + offset
        gate = torch.clamp(command.abs().amax(1, keepdim=True) / FF_MOVING_RAMP, 0.0, 1.0)
        return torch.cat([command / self.command_scale, gate * obs[:, self.clock_slice] / FF_PHASE_SCALE], 1)

    def weights(self, obs: torch.Tensor, offset: torch.Tensor | None = None) -> torch.Tensor:
        """(N, M) each library frame's weight."""
        return torch.softmax(self.query(obs, offset) @ self.keys.T - self.half_key_sq, dim=1)

    def forward(self, obs: torch.Tensor, offset: torch.Tensor | None = None) -> torch.Tensor:
        # in chunks: the weights of all 20040 frames of a1's library at its own 20040 frames (the residual's BC
        # targets) would be a 1.6 GB matrix, and its temporaries three of them
        if offset is None:
            return torch.cat([self.weights(chunk) @ self.targets for chunk in obs.split(FF_CHUNK)])
        return torch.cat([self.weights(chunk, shift) @ self.targets
                          for chunk, shift in zip(obs.split(FF_CHUNK), offset.split(FF_CHUNK))])
