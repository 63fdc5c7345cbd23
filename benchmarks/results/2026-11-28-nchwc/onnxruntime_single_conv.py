import numpy as np, onnx, onnxruntime as ort, time, sys
from onnx import helper, TensorProto, numpy_helper
def case(N,C,H,W,F,k,stride,pad,const,threads=1):
    rng=np.random.default_rng(0)
    x=rng.random((N,C,H,W),dtype=np.float32); w=rng.random((F,C,k,k),dtype=np.float32)
    inputs=[helper.make_tensor_value_info("x",TensorProto.FLOAT,x.shape)]
    inits=[]; feeds={"x":x}
    if const: inits=[numpy_helper.from_array(w,"w")]
    else: inputs.append(helper.make_tensor_value_info("w",TensorProto.FLOAT,w.shape)); feeds["w"]=w
    node=helper.make_node("Conv",["x","w"],["y"],strides=[stride]*2,pads=[pad]*4)
    g=helper.make_graph([node],"b",inputs,[helper.make_tensor_value_info("y",TensorProto.FLOAT,None)],initializer=inits)
    m=helper.make_model(g,opset_imports=[helper.make_opsetid("",13)]); m.ir_version=7
    so=ort.SessionOptions(); so.intra_op_num_threads=threads
    s=ort.InferenceSession(m.SerializeToString(),so,providers=["CPUExecutionProvider"])
    for i in range(5): s.run(None,feeds)
    ts=[]
    for i in range(30):
        a=time.perf_counter(); s.run(None,feeds); ts.append(time.perf_counter()-a)
    return sorted(ts)[15]*1e3
for name,args in [("R2",(1,64,56,56,64,3,1,1)),("R9",(1,256,14,14,1024,1,1,0)),("R11",(1,512,7,7,512,3,1,1)),("R12",(1,512,7,7,2048,1,1,0))]:
    print(name, "weights as input %.3f ms"%case(*args,False), "weights constant %.3f ms"%case(*args,True))
