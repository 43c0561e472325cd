set terminal pngcairo size 900,600 noenhanced
set datafile separator ','
set grid
set key bottom right
set output 'docs/results/convergence/P4-d0.001/accuracy_vs_epoch.png'
set title 'Test accuracy'
set xlabel 'epoch'
set ylabel 'test accuracy'
set xtics
plot 'runs/convergence/P4-dense/epochs.csv' every ::1 using ($1+1):5 with linespoints lw 2 title 'none+dense P=4 d=1', 'runs/convergence/P4-d0.001-gaussiank-allgather/epochs.csv' every ::1 using ($1+1):5 with linespoints lw 2 title 'gaussiank+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk2-allgather/epochs.csv' every ::1 using ($1+1):5 with linespoints lw 2 title 'rtopk(r=2k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk4-allgather/epochs.csv' every ::1 using ($1+1):5 with linespoints lw 2 title 'rtopk(r=4k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-allgather/epochs.csv' every ::1 using ($1+1):5 with linespoints lw 2 title 'topk+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk/epochs.csv' every ::1 using ($1+1):5 with linespoints lw 2 title 'topk+gtopk P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk-rd/epochs.csv' every ::1 using ($1+1):5 with linespoints lw 2 title 'topk+gtopk-rd P=4 d=0.001'
set key top right
set output 'docs/results/convergence/P4-d0.001/loss_vs_epoch.png'
set title 'Training loss'
set xlabel 'epoch'
set ylabel 'train loss'
set xtics
plot 'runs/convergence/P4-dense/epochs.csv' every ::1 using ($1+1):3 with linespoints lw 2 title 'none+dense P=4 d=1', 'runs/convergence/P4-d0.001-gaussiank-allgather/epochs.csv' every ::1 using ($1+1):3 with linespoints lw 2 title 'gaussiank+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk2-allgather/epochs.csv' every ::1 using ($1+1):3 with linespoints lw 2 title 'rtopk(r=2k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk4-allgather/epochs.csv' every ::1 using ($1+1):3 with linespoints lw 2 title 'rtopk(r=4k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-allgather/epochs.csv' every ::1 using ($1+1):3 with linespoints lw 2 title 'topk+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk/epochs.csv' every ::1 using ($1+1):3 with linespoints lw 2 title 'topk+gtopk P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk-rd/epochs.csv' every ::1 using ($1+1):3 with linespoints lw 2 title 'topk+gtopk-rd P=4 d=0.001'
set key bottom right
set output 'docs/results/convergence/P4-d0.001/accuracy_vs_simulated_time.png'
set title 'Test accuracy against simulated time'
set xlabel 'simulated time (s)'
set ylabel 'test accuracy'
set xtics
plot 'runs/convergence/P4-dense/epochs.csv' every ::1 using 7:5 with linespoints lw 2 title 'none+dense P=4 d=1', 'runs/convergence/P4-d0.001-gaussiank-allgather/epochs.csv' every ::1 using 7:5 with linespoints lw 2 title 'gaussiank+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk2-allgather/epochs.csv' every ::1 using 7:5 with linespoints lw 2 title 'rtopk(r=2k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk4-allgather/epochs.csv' every ::1 using 7:5 with linespoints lw 2 title 'rtopk(r=4k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-allgather/epochs.csv' every ::1 using 7:5 with linespoints lw 2 title 'topk+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk/epochs.csv' every ::1 using 7:5 with linespoints lw 2 title 'topk+gtopk P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk-rd/epochs.csv' every ::1 using 7:5 with linespoints lw 2 title 'topk+gtopk-rd P=4 d=0.001'
set key top right
set output 'docs/results/convergence/P4-d0.001/loss_vs_simulated_time.png'
set title 'Training loss (rank 0 batches) against simulated time'
set xlabel 'simulated time (s)'
set ylabel 'batch loss'
plot 'runs/convergence/P4-dense/metrics.csv' every ::1 using 10:3 with lines lw 1 title 'none+dense P=4 d=1', 'runs/convergence/P4-d0.001-gaussiank-allgather/metrics.csv' every ::1 using 10:3 with lines lw 1 title 'gaussiank+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk2-allgather/metrics.csv' every ::1 using 10:3 with lines lw 1 title 'rtopk(r=2k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-rtopk4-allgather/metrics.csv' every ::1 using 10:3 with lines lw 1 title 'rtopk(r=4k)+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-allgather/metrics.csv' every ::1 using 10:3 with lines lw 1 title 'topk+allgather P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk/metrics.csv' every ::1 using 10:3 with lines lw 1 title 'topk+gtopk P=4 d=0.001', 'runs/convergence/P4-d0.001-topk-gtopk-rd/metrics.csv' every ::1 using 10:3 with lines lw 1 title 'topk+gtopk-rd P=4 d=0.001'
