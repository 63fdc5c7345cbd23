import sys, statistics as st
runs={0:[],1:[]}
for line in open(sys.argv[1]):
    if line.startswith('POOLAB'):
        p=line.split(); runs[int(p[1])].append([float(x) for x in p[2:]])
s,w=runs[0],runs[1]
print(f"runs static {len(s)} stealing {len(w)}")
tot_s=st.median(r[0] for r in s); tot_w=st.median(r[0] for r in w)
print(f"total median static {tot_s*1e3:.3f} ms  stealing {tot_w*1e3:.3f} ms  ratio {tot_w/tot_s:.3f}")
# paired by consecutive runs
pairs=[w[i][0]/s[i][0] for i in range(min(len(s),len(w)))]
print(f"paired ratio median {st.median(pairs):.3f}")
n=len(s[0])-1
sum_s=sum(st.median(r[k+1] for r in s) for k in range(n)); sum_w=sum(st.median(r[k+1] for r in w) for k in range(n))
print(f"sum of kernel medians static {sum_s*1e3:.3f} stealing {sum_w*1e3:.3f}")
if len(sys.argv)>2:
    for k in range(n):
        a=st.median(r[k+1] for r in s); b=st.median(r[k+1] for r in w)
        if abs(a-b)>2e-5: print(k, f"{a*1e3:.3f} {b*1e3:.3f}")
