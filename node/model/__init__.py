"""The trained model (trees over bin slots, its file format, prediction) and the losses and metrics it is scored by."""
