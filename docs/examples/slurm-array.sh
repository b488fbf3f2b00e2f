#!/usr/bin/env bash
# One sweep as a Slurm job array: each array task runs one partition of the run's keys, and all of
# them share the account's rate limits and the sweep's budget through one Redis.
#
#   sbatch docs/examples/slurm-array.sh sweep.toml
#
# ifsweep reads the partition from SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT
# (task 0 of --array=0-3 is partition 0/4; --array=1-4 works too). The range must be contiguous. The
# run directory (run.output_dir) must be on a filesystem every node sees: partitions write their own
# shards there, and `ifsweep status` / `ifsweep report` merge them.
#
#SBATCH --job-name=ifsweep
#SBATCH --array=0-3
#SBATCH --cpus-per-task=2
#SBATCH --mem=2G
#SBATCH --time=12:00:00
#SBATCH --output=ifsweep-%A_%a.log
set -euo pipefail

CONFIG=${1:?usage: sbatch slurm-array.sh sweep.toml}

# The shared state: a redis-server every node can reach (or set run.coordinator in the config).
export IFSWEEP_COORDINATOR=${IFSWEEP_COORDINATOR:-redis://redis.cluster.internal:6379/0}
# Keys come from the environment, never from the config: export them before sbatch (Slurm passes the
# submitting shell's environment on) or load them from your site's secret store here.
: "${OPENAI_API_KEY:?export OPENAI_API_KEY before sbatch}"

# Exit 3 (budget reached) is a result, not a failure: the whole sweep stopped at the shared cap.
ifsweep run "$CONFIG" --progress plain || code=$?
if [ "${code:-0}" -eq 3 ]; then
    echo "budget reached: raise run.max_usd and resubmit the same array to resume"
    exit 0
fi
exit "${code:-0}"

# Afterwards, from any node:  ifsweep status RUN_DIR   (per partition, and the shared spend)
#                             ifsweep report RUN_DIR
# A task that died is resumed by running its partition again, named explicitly (a one-task array such
# as --array=2 would read as partition 0 of 1, i.e. every key):
#   sbatch --wrap "ifsweep run sweep.toml --partition 2/4"
