"""A PyTorch Geometric training script in the shape of PyG's examples/gcn.py: argparse,
a dataset under `data/` next to the script (PyG's examples use
osp.join(osp.dirname(osp.realpath(__file__)), '..', 'data', NAME)), processed once and then
loaded, a two-layer GCN trained full-batch, one line per epoch. The dataset is the
"Creating Your Own Datasets" tutorial's InMemoryDataset, made from a seeded random graph
(no download: the nodes have no network).

    python pyg_gcn.py --epochs 20 --lr 0.01
"""

import argparse
import os.path as osp
import time

import torch
import torch.nn.functional as F
from torch_geometric.data import Data, InMemoryDataset
from torch_geometric.nn import GCNConv

parser = argparse.ArgumentParser()
parser.add_argument("--hidden_channels", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--epochs", type=int, default=200)
args = parser.parse_args()


class SyntheticCommunities(InMemoryDataset):
    """Two communities of 60 nodes each, denser inside than across."""

    def __init__(self, root, transform=None):
        super().__init__(root, transform)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self):
        return []

    @property
    def processed_file_names(self):
        return ["data.pt"]

    def download(self):
        pass

    def process(self):
        g = torch.Generator().manual_seed(0)
        n = 120
        y = torch.arange(n) // 60
        same = y[:, None] == y[None, :]
        p = torch.where(same, 0.15, 0.01)
        adj = torch.rand(n, n, generator=g) < p
        adj = torch.triu(adj, 1)
        edge_index = adj.nonzero().t()
        edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
        x = torch.randn(n, 8, generator=g) + y[:, None].float()
        perm = torch.randperm(n, generator=g)
        train_mask = torch.zeros(n, dtype=torch.bool)
        train_mask[perm[:40]] = True
        val_mask = torch.zeros(n, dtype=torch.bool)
        val_mask[perm[40:80]] = True
        test_mask = ~(train_mask | val_mask)
        data = Data(x=x, edge_index=edge_index, y=y, train_mask=train_mask,
                    val_mask=val_mask, test_mask=test_mask)
        self.save([data], self.processed_paths[0])


path = osp.join(osp.dirname(osp.realpath(__file__)), "data", "Synthetic")
dataset = SyntheticCommunities(path)
data = dataset[0]


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels)
        self.conv2 = GCNConv(hidden_channels, out_channels)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, edge_index).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, edge_index)


model = GCN(dataset.num_features, args.hidden_channels, dataset.num_classes)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)


def train():
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    return float(loss)


@torch.no_grad()
def test():
    model.eval()
    pred = model(data.x, data.edge_index).argmax(dim=-1)
    accs = []
    for mask in [data.train_mask, data.val_mask, data.test_mask]:
        accs.append(int((pred[mask] == data.y[mask]).sum()) / int(mask.sum()))
    return accs


best_val_acc = test_acc = 0
times = []
for epoch in range(1, args.epochs + 1):
    start = time.time()
    loss = train()
    train_acc, val_acc, tmp_test_acc = test()
    if val_acc > best_val_acc:
        best_val_acc = val_acc
        test_acc = tmp_test_acc
    print(f"Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, "
          f"Val: {val_acc:.4f}, Test: {test_acc:.4f}", flush=True)
    times.append(time.time() - start)
print(f"Median time per epoch: {torch.tensor(times).median():.4f}s")
