set terminal pngcairo size 900,600 noenhanced
set output 'docs/results/scaling/efficiency.png'
set datafile separator ','
set title 'Scaling efficiency: resnet50 on paper-1gbe'
set xlabel 'workers'
set ylabel 'efficiency'
set logscale x 2
set yrange [0:1.05]
set grid
set key bottom left
plot for [m in 'dense topk gtopk gtopk-rd'] 'docs/results/scaling/scaling.csv' using 2:(strcol(1) eq m ? $6 : 1/0) every ::1 with linespoints lw 2 title m
