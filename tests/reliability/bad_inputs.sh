# Bad input to the command-line tool, one case a line, sourced by run.sh:
#   reject NAME REGEX ARGS...
# passes when `sparsgd ARGS...` exits non-zero (not by a signal, not after a hang) and its stderr
# matches REGEX. Cases that need LibTorch or MPI are inside `if with_torch` / `if with_mpi`.

# Numbers out of range, NaN, Inf, text where a number belongs, empty and huge values.
reject density_zero 'density must lie in \(0, 1\]' bench select --n 1000 --density 0
reject density_negative 'density must lie in \(0, 1\]' bench select --n 1000 --density -0.5
reject density_above_one 'density must lie in \(0, 1\]' bench select --n 1000 --density 1.5
reject density_nan 'density must be a finite number' bench select --n 1000 --density nan
reject density_inf 'density must be a finite number' bench select --n 1000 --density inf
reject density_text 'density' bench select --n 1000 --density abc
reject density_empty 'density' bench select --n 1000 --density ''
reject n_zero '--n must be at least 1' bench select --n 0
reject n_huge '32-bit indices' bench select --n 5000000000
reject n_enormous '--n.*below 2\^64' bench select --n 99999999999999999999999
reject n_negative '--n' bench select --n -5
reject n_fraction '--n' bench select --n 2.5
# Decimal only: CLI11 alone would read 0x10 as 16 and 010 as 8 (see run.sh for 010 = 10).
reject n_hex "--n: must be a decimal integer, got '0x10'" bench select --n 0x10
reject n_octal_prefix "must be a decimal integer" bench comm --n 0o17
reject n_binary_prefix "must be a decimal integer" bench comm --iters 0b11 --n 100
reject workers_hex "must be a decimal integer" simulate --model resnet50 --workers 0x20
reject repeat_zero '--repeat must be at least 1' bench select --n 100 --repeat 0
reject unknown_dist "unknown distribution 'bogus'" bench select --n 100 --dist bogus
reject unknown_subcommand 'subcommand is required|bogus' bench bogus
reject unknown_top_level "unknown command 'bogus'" bogus
reject unknown_option '--frobnicate' bench select --frobnicate
reject missing_value '--n' bench select --n

# The communication benchmark.
reject comm_workers_zero 'workers' bench comm --workers 0 --n 1000
reject comm_workers_huge 'workers' bench comm --workers 100000 --n 1000
reject comm_n_zero '--n must be at least 1' bench comm --workers 2 --n 0
reject comm_density_zero 'density must lie in' bench comm --workers 2 --n 1000 --density 0
reject comm_unknown_aggregator "unknown aggregator 'tree'" bench comm --workers 2 --n 1000 --aggregator tree
reject comm_unknown_compressor "unknown compressor 'zip'" bench comm --workers 2 --n 1000 --compressor zip
reject comm_randk_shared_needs_randk 'randk-shared' bench comm --workers 2 --n 1000 --aggregator randk-shared --compressor topk
reject comm_unknown_index_coding "unknown index coding 'rice' \\(expected raw or compressed\\)" bench comm --workers 2 --n 1000 --index-coding rice
reject comm_dense_compressed_indices 'the dense aggregator sends no indices, so they cannot be compressed' bench comm --workers 2 --n 1000 --aggregator dense --index-coding compressed
reject comm_auto_trials_range '--auto-trials: Value 17 not in range 0 to 16' bench comm --workers 2 --n 1000 --aggregator auto --auto-trials 17
reject comm_auto_trials_word '--auto-trials' bench comm --workers 2 --n 1000 --aggregator auto --auto-trials many
reject comm_interleave_itself '--interleave gtopk-rd is --aggregator itself: name another aggregator' bench comm --workers 2 --n 1000 --aggregator gtopk-rd --interleave gtopk-rd
reject comm_interleave_unknown "unknown aggregator 'gtopk-tree'" bench comm --workers 2 --n 1000 --aggregator gtopk-rd --interleave gtopk-tree
reject comm_interleave_mpi '--interleave runs both aggregators on the workers of one process: it needs --transport local, not mpi' bench comm --transport mpi --n 1000 --aggregator gtopk-rd --interleave oktopk
reject comm_interleave_incompatible 'the dense aggregator sends no indices' bench comm --workers 2 --n 1000 --aggregator gtopk-rd --interleave dense --index-coding compressed
reject comm_selections_unknown "unknown --selections 'some'" bench comm --workers 2 --n 1000 --selections some
reject comm_selections_drawn_compressor '--selections drawn draws every worker' bench comm --workers 2 --n 1000 --selections drawn --compressor randk
reject comm_selections_drawn_feedback '--selections drawn draws every worker' bench comm --workers 2 --n 1000 --selections drawn --error-feedback off
reject comm_unknown_transport 'transport' bench comm --transport carrier-pigeon --n 1000
reject comm_unknown_network 'unknown network' bench comm --workers 2 --n 1000 --network 3gbe
reject comm_network_negative_alpha 'alpha' bench comm --workers 2 --n 1000 --network alpha=-1,bw=1e9
reject comm_network_no_bandwidth 'bandwidth|bw' bench comm --workers 2 --n 1000 --network alpha=0.001
reject comm_network_zero_bandwidth 'bandwidth|bw' bench comm --workers 2 --n 1000 --network alpha=0.001,bw=0
reject comm_network_nan 'alpha|finite' bench comm --workers 2 --n 1000 --network alpha=nan,bw=1e9
reject comm_network_huge_alpha 'alpha must be in \[0, 1000\] seconds' bench comm --workers 2 --n 1000 --network alpha=1e308,bw=1e-300
reject comm_network_tiny_bandwidth 'bw must be in \[1, 1e18\] bits per second' bench comm --workers 2 --n 1000 --network alpha=0.001,bw=1e-300
reject comm_network_huge_bandwidth 'bw must be in \[1, 1e18\] bits per second' bench comm --workers 2 --n 1000 --network alpha=0.001,bw=1e300
reject simulate_network_huge_alpha 'alpha must be in \[0, 1000\] seconds' simulate --network alpha=5000,bw=1e9
reject comm_iters_zero 'iters' bench comm --workers 2 --n 1000 --iters 0
reject comm_timeout_zero 'timeout' bench comm --workers 2 --n 1000 --timeout-ms 0
reject comm_model_network_with_network '--model-network is for runs without --network' bench comm --n 100 --network 1gbe --model-network 1gbe
reject comm_model_network_unknown 'unknown network' bench comm --n 100 --model-network 3gbe
reject comm_r_factor_below_one 'r.factor|r_factor' bench comm --workers 2 --n 1000 --compressor rtopk --r-factor 0.5

# The closed-form model.
reject simulate_unknown_model "unknown model preset 'gpt'" simulate --model gpt
reject simulate_needs_compute '--compute-ms is required' simulate --model lstm-ptb
reject simulate_bad_compress '--compress-ms must be a number' simulate --compress-ms fast
reject simulate_no_network 'bandwidth' simulate --network none
reject simulate_workers_zero 'workers' simulate --model resnet50 --workers 0
reject simulate_workers_text 'workers' simulate --model resnet50 --workers 4,eight
reject simulate_workers_empty 'workers' simulate --model resnet50 --workers ''
reject simulate_params_zero 'params' simulate --params 0 --compute-ms 10
reject simulate_params_fraction 'must be a whole number of gradient entries' simulate --model custom --params 1.5 --compute-ms 10
reject simulate_compute_negative 'compute' simulate --model resnet50 --compute-ms -1
reject simulate_density_zero 'density' simulate --model resnet50 --density 0
# An empty path (an unset shell variable) is not "the default".
reject simulate_out_empty "--out: must name a file or directory, got an empty string" simulate --model resnet50 --out ''

# Training: options, paths, checkpoints, fault specs.
if with_torch; then
  reject train_unknown_model "--model vgg is not a model of --task fashion-mnist \\(expected mlp, cnn, resnet20" train --model vgg
  reject train_unknown_task "unknown --task 'imagenet' \\(expected fashion-mnist, cifar10 or lm\\)" train --task imagenet
  reject train_model_of_other_task "--model lstm is not a model of --task cifar10" train --task cifar10 --model lstm
  reject train_vgg16_on_28x28 "model vgg16 needs images of at least 32x32" train --model vgg16 --max-iters 1 --network none
  reject train_cifar10_without_data "--task cifar10 needs --data DIR" train --task cifar10 --max-iters 1
  reject train_cifar10_missing_files "data_batch_1.bin not found" train --task cifar10 --data "$work" --max-iters 1
  reject train_lm_missing_files "train.txt not found" train --task lm --data "$work" --max-iters 1
  reject train_model_file_missing "TorchScript model $work/none.pt not found" train --model "$work/none.pt"
  reject train_bptt_zero "--bptt must be at least 1, got 0" train --task lm --bptt 0
  reject train_hidden_size_zero "--hidden-size must be in \\[1, 65536\\], got 0" train --task lm --hidden-size 0
  reject train_dropout_one "--dropout must be in \\[0, 1\\), got 1" train --task lm --dropout 1
  reject train_clip_norm_negative "--clip-norm must be >= 0 \\(0: none\\), got -1" train --clip-norm -1
  reject train_checkpoint_every_beyond_run "--checkpoint-every 50 is more than the run's 20 iterations less one: no checkpoint would ever be written" \
    train --workers 2 --max-iters 20 --checkpoint-every 50 --network none --out "$work/checkpoint-beyond"
  reject train_batch_larger_than_shard "--batch-size 20000 is more than a worker's shard \\(15000 of the 60000" \
    train --workers 4 --batch-size 20000 --max-iters 1 --network none --out "$work/batch-larger"
  reject train_out_empty "--out: must name a file or directory, got an empty string" train --out ''
  reject train_resume_empty "--resume: must name a file or directory" train --resume ''
  reject train_data_empty "--data: must name a file or directory" train --data ''
  reject train_unknown_compressor "unknown compressor 'zip'" train --compressor zip
  reject train_unknown_aggregator "unknown aggregator 'tree'" train --aggregator tree
  reject train_unknown_optimizer "unknown --optimizer 'rmsprop'" train --optimizer rmsprop
  reject train_adam_momentum_correction '--momentum-correction on and --nesterov belong to --optimizer sgd' train --optimizer adam --momentum-correction on
  reject train_batch_zero '--batch-size must be at least 1' train --batch-size 0
  reject train_momentum_correction_word "momentum-correction.*maybe" train --momentum-correction maybe
  reject train_error_feedback_word "error-feedback.*maybe" train --error-feedback maybe
  reject train_auto_trials_negative '--auto-trials: Value -1 not in range 0 to 16' train --aggregator auto --auto-trials -1
  reject train_unknown_index_coding "unknown index coding 'bitmap'" train --index-coding bitmap
  reject train_randk_shared_compressed_indices 'the randk-shared aggregator sends no indices' \
    train --aggregator randk-shared --compressor randk --index-coding compressed
  reject train_unbiased_with_feedback "scales the values it sends, which error feedback cannot account for: switch error feedback off" \
    train --compressor randk-unbiased --aggregator randk-shared
  reject train_dense_compressor_sparse_aggregator "the none compressor sends all n entries: use the dense aggregator, or density 1" \
    train --compressor none --aggregator gtopk-rd
  reject train_device_unknown "--device must be cpu, cuda or cuda:N, got 'gpu'" train --device gpu
  reject train_device_past_the_last "--device cuda:99: (no CUDA GPU is visible|this process sees)" train --device cuda:99
  reject train_validation_negative "--validation must be >= 0" train --validation -1
  reject train_validation_everything "--validation 60000 leaves nothing to train on: the training set has 60000 examples" \
    train --validation 60000 --max-iters 1 --network none --out "$work/validation-everything"
  reject train_validation_lm "--task lm evaluates on valid.txt" train --task lm --validation 5
  reject comm_unbiased_with_feedback "switch error feedback off" bench comm --workers 2 --n 1000 --compressor randk-unbiased
  reject train_negative_lr '--lr must be a positive number' train --lr -0.1
  reject train_nan_lr '--lr must be a positive number' train --lr nan
  reject train_momentum_one '--momentum must be in \[0, 1\)' train --momentum 1
  reject train_negative_weight_decay '--weight-decay must be >= 0' train --weight-decay -1
  reject train_epochs_zero '--epochs must be at least 1' train --epochs 0
  reject train_density_zero 'density must lie in' train --density 0
  reject train_warmup_density_above_one 'density must lie in' train --warmup-density 2
  reject train_workers_zero '--workers must be in \[1, 1024\]' train --workers 0
  reject train_workers_huge '--workers must be in \[1, 1024\]' train --workers 5000
  reject train_unknown_schedule "unknown --lr-schedule 'wave'" train --lr-schedule wave
  reject train_negative_checkpoint_every '--checkpoint-every must be >= 0' train --checkpoint-every -1
  reject train_timeout_zero '--timeout-ms must be at least 1' train --timeout-ms 0
  reject train_unknown_nonfinite_policy "unknown --on-nonfinite 'ignore'" train --on-nonfinite ignore
  reject train_fault_malformed 'KIND:RANK:ITERATION' train --inject-fault nan:1
  reject train_fault_unknown_kind 'KIND:RANK:ITERATION' train --inject-fault meteor:0:1
  reject train_fault_rank_out_of_range 'names rank 7 but there are 2 workers' train --workers 2 --max-iters 1 --inject-fault nan:7:0
  reject train_bad_network 'unknown network' train --network 3gbe
  reject train_randk_shared_needs_randk 'randk-shared aggregator needs the randk or randk-unbiased compressor' train --aggregator randk-shared
  reject train_missing_data 'apt-get install dataset-fashion-mnist' train --data /nonexistent --max-iters 1
  reject train_data_is_a_file 'fashion|Fashion|cannot' train --data /etc/hostname --max-iters 1
  reject train_missing_checkpoint 'no such run directory' train --resume "$work/nonexistent-run" --max-iters 1
  [ -e "$work/nonexistent-run" ] && fail "bad input train_missing_checkpoint" "a refused resume created the directory"
  mkdir -p "$work/run-without-checkpoints"
  reject train_resume_without_checkpoints 'cannot open checkpoint' train --resume "$work/run-without-checkpoints" --max-iters 1
  reject train_warmup_density_epochs_zero '--warmup-density-epochs must be a positive number of epochs' train --warmup-density-epochs 0
  reject train_warmup_density_epochs_nan '--warmup-density-epochs must be a positive number of epochs' train --warmup-density-epochs nan
  reject train_crash_checkpoint_without_checkpoints 'this run writes none: add --checkpoint-every' \
    train --workers 2 --max-iters 5 --inject-fault crash-checkpoint:0:1 --network none
  reject train_crash_checkpoint_after_the_last 'writes its last at iteration 5 .*: it would never happen' \
    train --workers 2 --max-iters 10 --checkpoint-every 5 --inject-fault crash-checkpoint:0:7 --network none --out "$work/late-crash"
  reject train_fault_after_the_run "planned at iteration 9, but the run's iterations are 0 to 4: it would never happen" \
    train --workers 2 --max-iters 5 --inject-fault throw:0:9 --network none
  mkdir -p "$work/empty-records"
  printf 'epoch,iterations,train_loss,test_loss,test_accuracy,wall_s,simulated_s,bytes_per_iteration,test_perplexity,validation_loss,validation_accuracy\n' \
    >"$work/empty-records/epochs.csv"
  printf 'epoch,step,loss,lr,density,bytes_sent,compute_s,compression_s,communication_s,simulated_s,wall_s\n' \
    >"$work/empty-records/metrics.csv"
  reject plot_empty_records 'nothing to plot in .*empty-records: its epochs.csv and metrics.csv hold no finite value' \
    plot "$work/empty-records"
  cp -r "$work/empty-records" "$work/nan-records"
  printf '0,10,nan,nan,nan,1,nan,100,0,nan,nan\n' >>"$work/nan-records/epochs.csv"
  printf '0,1,nan,0.1,0.01,100,0.1,0.1,0.1,nan,1\n' >>"$work/nan-records/metrics.csv"
  reject plot_nan_records 'nothing to plot in .*nan-records' plot "$work/nan-records"
  reject train_unwritable_out 'cannot|Permission|Not a directory|exists' train --out /proc/version/run --max-iters 1
  reject plot_rejects_non_run 'not a training run directory' plot /tmp
  reject plot_out_empty "--out: must name a file or directory" plot /tmp --out ''
  reject plot_run_empty "must name a file or directory" plot ''
  reject plot_missing_dir 'not a training run directory|cannot|No such' plot /nonexistent-run
fi
