"""Budgets of the family: one entry per op it registers (see fbgemm_npu.native.family.Budget)."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {}
