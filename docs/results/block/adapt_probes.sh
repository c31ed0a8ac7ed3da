#!/bin/bash
# Adaptation probes on the quickstart corpus (old env code), all from the AR's step 300, 150 steps in all.
cd /work/main
Q=/work/runs/qs; D=$Q/data
common="--config=configs/quickstart.py --config.data.train=$D/train.jsonl --config.data.valid=$D/valid.jsonl --config.data.tokenizer=$D/tokenizer.model --config.train.ar_start_steps=0 --config.optim.warmup_steps=30"
run() { name=$1; shift; [ -f /work/runs/adapt/$name/done ] || { python -m launch.train $common --workdir=/work/runs/adapt/$name "$@" > /work/runs/adapt/$name.log 2>&1 && touch /work/runs/adapt/$name/done; }; }
run b4 --config.train.init_from=$Q/ar --config.train.init_step=300 --config.train.steps=150 --config.diffusion.block_size=4
run b2s75 --config.train.init_from=$Q/ar --config.train.init_step=300 --config.train.steps=75 --config.diffusion.block_size=2 --config.optim.warmup_steps=10
run b2to4 --config.train.init_from=/work/runs/adapt/b2s75 --config.train.steps=75 --config.diffusion.block_size=4 --config.optim.warmup_steps=10
run naive --config.train.init_from=$Q/ar --config.train.init_step=300 --config.train.steps=150 --config.diffusion.block_size=0 --config.diffusion.shift=false
run b4lr --config.train.init_from=$Q/ar --config.train.init_step=300 --config.train.steps=150 --config.diffusion.block_size=4 --config.optim.lr=1e-3
run b4from450 --config.train.init_from=$Q/ar --config.train.init_step=450 --config.train.steps=150 --config.diffusion.block_size=4 --config.optim.lr=1e-3
run b4clip --config.train.init_from=$Q/ar --config.train.init_step=300 --config.train.steps=150 --config.diffusion.block_size=4 --config.optim.lr=1e-3 --config.diffusion.t_min=0.3 --config.diffusion.t_max=0.8
run b8clip --config.train.init_from=$Q/ar --config.train.init_step=300 --config.train.steps=150 --config.diffusion.block_size=8 --config.optim.lr=1e-3 --config.diffusion.t_min=0.3 --config.diffusion.t_max=0.8
run b4anneal100 --config.train.init_from=$Q/ar --config.train.init_step=300 --config.train.steps=150 --config.diffusion.block_size=4 --config.optim.lr=1e-3 --config.diffusion.anneal_steps=100
