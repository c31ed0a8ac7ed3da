"""The MDLM-vs-AR study: MDLM at size S, AR at S, AR at ~4x S (issue 5)."""
