#!/usr/bin/python3
"""Writes tests/fixtures/reference_rnn.json: torch 1.13's recurrent layers in float64 (RNN,
2-layer bidirectional LSTM and GRU, the three cells), each with its state dict, inputs,
initial states, outputs and the gradients of every input and parameter of a weighted sum of
the outputs, read by tests/test_rnn.cpp.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_rnn.py
"""
import json
import os

import torch

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


def flat(t):
    return {"shape": list(t.shape), "data": t.detach().reshape(-1).tolist()}


def layer_case(name, mod, x, states):
    """states: the initial states (h0, or (h0, c0)), or None for zeros."""
    x = x.clone().requires_grad_(True)
    st = None
    if states is not None:
        st = tuple(s.clone().requires_grad_(True) for s in states)
    out, hn = mod(x, None if st is None else (st if len(st) == 2 else st[0]))
    outs = [out] + (list(hn) if isinstance(hn, tuple) else [hn])
    weights = [torch.randn_like(o) for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, weights))
    loss.backward()
    case = {"name": name, "kind": type(mod).__name__, "input_size": mod.input_size, "hidden_size": mod.hidden_size,
            "num_layers": mod.num_layers, "bidirectional": mod.bidirectional, "batch_first": mod.batch_first,
            "nonlinearity": getattr(mod, "nonlinearity", "tanh"), "bias": mod.bias,
            "params": {k: flat(v) for k, v in mod.state_dict().items()}, "x": flat(x),
            "outputs": [flat(o) for o in outs], "output_weights": [flat(w) for w in weights],
            "grad_x": flat(x.grad), "grad_params": {k: flat(p.grad) for k, p in mod.named_parameters()}}
    if st is not None:
        case["states"] = [flat(s) for s in st]
        case["grad_states"] = [flat(s.grad) for s in st]
    return case


def cell_case(name, mod, x, states):
    x = x.clone().requires_grad_(True)
    st = [s.clone().requires_grad_(True) for s in states]
    res = mod(x, tuple(st) if len(st) == 2 else st[0])
    outs = list(res) if isinstance(res, tuple) else [res]
    weights = [torch.randn_like(o) for o in outs]
    sum((o * w).sum() for o, w in zip(outs, weights)).backward()
    return {"name": name, "kind": type(mod).__name__, "input_size": mod.input_size, "hidden_size": mod.hidden_size,
            "nonlinearity": getattr(mod, "nonlinearity", "tanh"), "bias": mod.bias,
            "params": {k: flat(v) for k, v in mod.state_dict().items()}, "x": flat(x),
            "states": [flat(s) for s in st], "outputs": [flat(o) for o in outs],
            "output_weights": [flat(w) for w in weights], "grad_x": flat(x.grad),
            "grad_states": [flat(s.grad) for s in st],
            "grad_params": {k: flat(p.grad) for k, p in mod.named_parameters()}}


T, N, I, H = 5, 2, 3, 4
cases = []
nn = torch.nn
lstm = nn.LSTM(I, H, num_layers=2, bidirectional=True)
cases.append(layer_case("lstm_2layer_bidirectional", lstm, torch.randn(T, N, I),
                        (torch.randn(4, N, H), torch.randn(4, N, H))))
gru = nn.GRU(I, H, num_layers=2, bidirectional=True, batch_first=True)
cases.append(layer_case("gru_2layer_bidirectional_batch_first", gru, torch.randn(N, T, I), (torch.randn(4, N, H),)))
cases.append(layer_case("rnn_relu_zero_state", nn.RNN(I, H, nonlinearity="relu"), torch.randn(T, N, I), None))
cases.append(layer_case("lstm_unbatched_no_bias", nn.LSTM(I, H, bias=False), torch.randn(T, I), None))
cases.append(layer_case("gru_zero_state", nn.GRU(I, H), torch.randn(T, N, I), None))
cases.append(cell_case("lstm_cell", nn.LSTMCell(I, H), torch.randn(N, I), [torch.randn(N, H), torch.randn(N, H)]))
cases.append(cell_case("gru_cell", nn.GRUCell(I, H), torch.randn(N, I), [torch.randn(N, H)]))
cases.append(cell_case("rnn_tanh_cell", nn.RNNCell(I, H), torch.randn(N, I), [torch.randn(N, H)]))

out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "reference_rnn.json")
with open(out, "w") as f:
    json.dump({"generator": "tools/gen_reference_rnn.py", "torch": torch.__version__, "cases": cases}, f)
    f.write("\n")
print("wrote", len(cases), "cases to", os.path.normpath(out))
