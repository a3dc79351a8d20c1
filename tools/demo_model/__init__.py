"""Pieces of tools/train_demo_model.py: corpus, tokenizer, model, export."""
