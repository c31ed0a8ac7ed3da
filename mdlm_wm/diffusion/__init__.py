"""Masked diffusion: noise schedules, the MDLM objective and the denoising sampler."""
