"""WarpDrive's multi-agent Tag envs: TagGridWorld and TagContinuous."""
