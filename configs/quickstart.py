"""The quickstart: the default corpus, tiny MDLM and AR models, minutes on 2 CPU cores."""

from mdlm_wm.config import base_config


def get_config():
  cfg = base_config()
  # 200 episodes an environment (about 8,500 training transitions): the 450
  # steps of 16 see each about once. At 60 both models overfit (AR train
  # loss 0.63, valid 1.03); at 200, same steps, env check / pass on 150
  # test transitions: MDLM 0.572 / 0.060 -> 0.584 / 0.087, AR 0.584 / 0.093
  # -> 0.572 / 0.067 (copy s_t 0.749 / 0.053 -> 0.756 / 0.073: the test
  # transitions differ). Building it takes about a second.
  cfg.corpus.episodes_per_env = 200
  cfg.corpus.tokenizer_vocab = 2048
  # Short contexts keep CPU steps cheap: tool schemas and rules are truncated
  # by the counted policy, the current state and action are kept.
  cfg.data.batch_size = 16
  # The MDLM's rows hold a noisy and a clean copy of the target; the quickstart
  # trains the AR on rows of max_context_len + max_target_len (512). A
  # canvas of 256 holds every test target (at 128, 6 of the 150 did not
  # fit, so at most 96% of the states could parse). Measured over seeds 0,
  # 1 and 2, env check 128 -> 256: MDLM 0.606 -> 0.639, AR 0.627 -> 0.662;
  # the run takes 11 minutes, not 7.
  cfg.data.seq_len = 768
  cfg.data.max_context_len = 256
  cfg.data.max_target_len = 256
  cfg.data.history_len = 0
  cfg.model.d_model = 128
  cfg.model.n_layers = 2
  cfg.model.n_heads = 4
  cfg.model.n_kv_heads = 2
  cfg.model.d_ff = 384
  cfg.train.steps = 450
  cfg.optim.warmup_steps = 30
  cfg.train.log_every = 25
  cfg.train.eval_every = 150
  cfg.train.checkpoint_every = 150
  # 30 test transitions per environment (150): at 10, one episode per
  # environment decided a model's score (seconds of sampling either way).
  cfg.eval.examples_per_env = 30
  # Both models write the next state as its change from s_t (data/delta.py).
  # Measured on this corpus (150 test transitions, greedy, env check / pass;
  # copy s_t 0.749 / 0.053): the AR 0.475 / 0.000 writing whole states,
  # 0.584 / 0.093 writing deltas.
  cfg.data.target = "delta"
  # The MDLM: the AR's step-300 checkpoint adapted to blocks of 2 for the
  # remaining 150 steps (450 in all, as the AR), at a third of the AR's peak
  # learning rate. Measured as above, from the delta AR: blocks of 2 0.572 /
  # 0.060, blocks of 4 0.457 / 0.060 (at 3e-4: 0.528 / 0.080).
  cfg.train.ar_start_steps = 300
  cfg.train.ar_start_lr = 1e-3
  cfg.diffusion.block_size = 2
  # diffusion.clean_ar_weight (the clean copy causal in its block, trained
  # with the AR's next-token loss beside the ELBO) is the base config's 2.
  # Measured on the seed-0 models, weight 0 / 0.5 / 1 / 2 / 4: left-to-right
  # nats per target token on 400 validation transitions
  # (docs/results/block/l2r_nll.py) 0.848 / 0.810 / 0.789 / 0.770 / 0.760
  # (the AR at step 450: 0.785); env check on the 150 test transitions
  # 0.722 / 0.745 / 0.749 / 0.755 / 0.750, pass 0.093 / 0.093 / 0.100 /
  # 0.107 / 0.107 (AR 0.723 / 0.080, copy s_t 0.756 / 0.073).
  cfg.sample.steps = 2  # per block: one token a step
  # Commit the leftmost free position first: measured as above, blocks of 2
  # 0.572 against 0.534 committing the lowest-entropy position first (and
  # the whole-state quickstart MDLM 0.429 against 0.386).
  cfg.sample.confidence = "left_to_right"
  # A greedy state that does not parse as its environment's state is drawn
  # again at temperature 0.7, up to 8 times (WorldModel.redraw), for both
  # models. Measured on the seed-0 models of the 256 canvas: states that
  # parse MDLM 0.713 -> 0.973, AR 0.787 -> 0.980; env check 0.621 -> 0.733,
  # 0.653 -> 0.747 (copy s_t 0.756). Over seeds 0, 1, 2: MDLM 0.729, AR
  # 0.741. The table says how many parsed at the first draw.
  cfg.sample.format_retries = 8
  return cfg
