"""Imports every built-in environment so that each registers itself."""

from mdlm_wm.envs import calendar_apps, files, household, lab, shop  # noqa: F401
