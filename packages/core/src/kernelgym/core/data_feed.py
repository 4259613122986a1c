"""DataFeed: the dictionary of named data that CUDADataManager.push_data_to_device takes."""

from __future__ import annotations

__all__ = ["DataFeed", "DATA_ATTRIBUTES"]

# Attributes the data manager understands; others are kept and ignored.
DATA_ATTRIBUTES = ("save_copy_and_apply_at_reset", "log_data_across_episode", "layout")


class DataFeed(dict):
    """Named data with attributes, in the form ``push_data_to_device`` takes.

    ``{name: {"data": array_or_scalar, "attributes": {...}}}``.

    Examples
    --------
    >>> feed = DataFeed()
    >>> feed.add_data(name="x", data=[[1.0, 2.0]], save_copy_and_apply_at_reset=True)
    >>> feed["x"]["attributes"]["save_copy_and_apply_at_reset"]
    True
    """

    def add_data(
        self,
        name: str,
        data,
        save_copy_and_apply_at_reset: bool = False,
        log_data_across_episode: bool = False,
        **kwargs,
    ) -> None:
        """Add one named array or scalar.

        Parameters
        ----------
        name : str
            Unique name.
        data : array_like or scalar
            Values; lists become numpy arrays with numpy's default dtypes (float64,
            int64). No dtype is changed after that.
        save_copy_and_apply_at_reset : bool
            Keep a device copy of these values and restore it, per env, when an env is
            reset on the device. The leading dim must be ``num_envs``.
        log_data_across_episode : bool
            Keep a ``(episode_length + 1, *shape)`` log buffer ``<name>_for_log`` that
            ``log_step`` fills. The leading dim must be ``num_envs``.
        **kwargs
            Further attributes, e.g. ``layout="per_env"`` or ``"per_agent"`` to have the
            leading dims checked against ``(num_envs,)`` or ``(num_envs, num_agents)``.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"name: expected a non-empty str, got {type(name).__name__} {name!r}")
        if name in self:
            raise ValueError(f"{name}: already in this DataFeed; each name may be added once")
        attributes = {
            "save_copy_and_apply_at_reset": bool(save_copy_and_apply_at_reset),
            "log_data_across_episode": bool(log_data_across_episode),
            **kwargs,
        }
        self[name] = {"data": data, "attributes": attributes}

    def add_data_list(self, data_list) -> None:
        """Add several entries.

        Each is a tuple ``(name, data[, save_copy_and_apply_at_reset[, log_data_across_episode]])``.
        """
        for entry in data_list:
            self.add_data(*entry)
