# mini-shapes reference "majority": predict the most frequent train label.
import numpy as np

y = np.load("data/train_labels.npy")
x = np.load("data/test_data.npy")
c = int(np.bincount(y).argmax())
print("majority class", c)
np.savetxt("results/test_preds.txt", np.full(len(x), c, dtype=np.int64), fmt="%d")
