"""A Lightning script as the Lightning docs' quick start writes it: no command line."""

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
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32)
    trainer = L.Trainer(max_epochs=2, enable_progress_bar=False)
    trainer.fit(LitRegressor(), loader)
    print(f"done: global_rank={trainer.global_rank} world_size={trainer.world_size}"
          f" global_step={trainer.global_step}", flush=True)
