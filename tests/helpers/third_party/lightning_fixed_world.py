"""A Lightning script whose author wrote the laptop's counts into the Trainer."""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitRegressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    x = torch.randn(64, 8)
    trainer = L.Trainer(max_epochs=1, num_nodes=1, devices=1, accelerator="cpu")
    trainer.fit(LitRegressor(), DataLoader(TensorDataset(x, x), batch_size=8))
    print("trained", flush=True)
