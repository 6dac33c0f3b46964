# mini-shapes reference "weak": nearest class centroid on one feature,
# the population std of the 64 distances to the centre (0.5, 0.5).
import numpy as np


def feature(path):
    x = np.load(path).astype(np.float64)
    dx = x[:, :, 0] - 0.5
    dy = x[:, :, 1] - 0.5
    d = np.sqrt(dx * dx + dy * dy)
    return d.std(axis=1)


f_train = feature("data/train_data.npy")
y = np.load("data/train_labels.npy")
f_test = feature("data/test_data.npy")
centroids = np.array([f_train[y == c].mean() for c in range(3)])
train_pred = np.abs(f_train[:, None] - centroids[None, :]).argmin(axis=1)
print("train accuracy", (train_pred == y).mean())
pred = np.abs(f_test[:, None] - centroids[None, :]).argmin(axis=1)
np.savetxt("results/test_preds.txt", pred, fmt="%d")
