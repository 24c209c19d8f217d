//! Goods received notes: deliveries posted as batches at landed cost.
