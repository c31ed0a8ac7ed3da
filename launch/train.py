r"""Trains an MDLM or AR world model; resumes when WORKDIR has a checkpoint.

  python -m launch.train --config=configs/quickstart.py --workdir=/tmp/wm \
      --config.objective=mdlm --config.data.train=/tmp/corpus/train.jsonl \
      --config.data.valid=/tmp/corpus/valid.jsonl \
      --config.data.tokenizer=/tmp/corpus/tokenizer.model

Multi-process (docs/scaling.md): run the same command in every process with
either --distributed (jax detects Cloud TPU, SLURM, Open MPI) or the
coordinator, process count and process id as flags or as the environment
variables COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID.
"""

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm.train import distributed
from mdlm_wm.train.trainer import train
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
flags.DEFINE_string("workdir", None, "Checkpoints, metrics.jsonl and TensorBoard go here; "
                    "shared by every process of a multi-process run.", required=True)
flags.mark_flag_as_required("config")
flags.DEFINE_integer("max_steps", None, "Stop after this many steps of this launch (a "
                     "time-boxed job); the schedule still follows config.train.steps.")
flags.DEFINE_integer("data_shards", 0, "Data shards per global batch (a multiple of the "
                     "process count); 0: the checkpoint's, else one per process. Fix it to "
                     "resume on another number of processes with the same batches.")
flags.DEFINE_bool("distributed", False, "Join a multi-process job; settings not given are "
                  "detected by jax.distributed.initialize (Cloud TPU, SLURM, Open MPI).")
flags.DEFINE_string("coordinator_address", "", "host:port of process 0's coordinator "
                    "(env COORDINATOR_ADDRESS).")
flags.DEFINE_integer("num_processes", 0, "Processes in the job (env NUM_PROCESSES).")
flags.DEFINE_integer("process_id", -1, "This process's index (env PROCESS_ID).")
flags.DEFINE_integer("distributed_timeout", 300, "Seconds to wait for every process to join.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  with errors.reported():
    settings = distributed.resolve(FLAGS.coordinator_address, FLAGS.num_processes,
                                   FLAGS.process_id, FLAGS.distributed)
  if distributed.initialize(settings, FLAGS.distributed_timeout):
    print(distributed.describe(), flush=True)
  with errors.reported():
    result = train(_CONFIG.value, FLAGS.workdir, max_steps=FLAGS.max_steps,
                   data_shards=FLAGS.data_shards)
  print(result.summary())


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
