"""Fixtures for kernelgym-memory's tests (torch and numpy only)."""

import pytest
import torch


def chi_square_bound(degrees_of_freedom: int) -> float:
    """A loose upper bound for a chi-square statistic (about mean + 6 standard deviations)."""
    return degrees_of_freedom + 6 * (2 * degrees_of_freedom) ** 0.5


@pytest.fixture
def chi_square():
    def statistic(observed: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
        observed, expected = observed.double(), expected.double()
        value = float(((observed - expected) ** 2 / expected).sum())
        return value, chi_square_bound(observed.numel() - 1)

    return statistic


def step_values(step: int, num_samples: int, width: int = 2) -> torch.Tensor:
    """Distinct float32 rows for sample ``k`` of step ``step``: row k is [1000*step + k, ...]."""
    base = torch.arange(num_samples, dtype=torch.float32) + 1000.0 * step
    return base.unsqueeze(1) + torch.arange(width, dtype=torch.float32) * 0.25


@pytest.fixture
def values():
    return step_values
