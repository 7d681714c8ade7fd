"""The options the mathematics takes by name, and its limits, without torch: the command line and the pages offer
and check them before anything is computed. The modules that use them import them from here."""

TWO_RELU_METHODS = ("mfvi", "sgm")  # two_relu: mean-field VI, or its symmetrised posterior
TWO_RELU_MI_ESTIMATORS = ("exact", "infonce")  # two_relu: I(w; g) over G = {id, swap} enumerated, or InfoNCE's I_K
TWO_RELU_INITS = ("random", "origin")  # two_relu: the variational means drawn from N(0, 0.5²), or both at 0
BNN_ESTIMATORS = ("reparam", "local", "flipout")  # bnn: the gradient estimators of the expected log-likelihood
SORT_KEYS = ("first_in", "max_in", "first_out")  # symmetry: what orders a layer's units in symmetry removal
ALIGN_DEFAULT_STARTS = 64  # align: descents with two or more hidden layers (one hidden layer needs one)
ALIGN_MAX_STARTS = 256  # align: a cap on the starts, each one more descent about as costly as the first
CLASSES = 10  # networks: MNIST's digits
ARCHITECTURES = ("convnet", "mlp")  # networks
WEIGHTS_MAX_FILE_MB = 64  # weights: the largest network file read
BNN_LIBRARIES = ("bayesian-torch", "BLiTZ", "torchbnn", "Pyro AutoNormal")  # bnn_formats: whose posteriors are read
REMOVAL_KEYS = ("first", "max")  # networks: Laurent et al.'s first parameter (App. C.2); the largest incoming weight


def library_names() -> str:
    """The BNN libraries whose files are read, in words: "a, b, c or d"."""
    return f"{', '.join(BNN_LIBRARIES[:-1])} or {BNN_LIBRARIES[-1]}"
