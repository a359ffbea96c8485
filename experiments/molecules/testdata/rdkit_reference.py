# Writes sample_rdkit.tsv, the reference the tests compare the parser with:
# RDKit's heavy atoms, bonds and formula of each SMILES of sample.csv, and
# RDKit's own (aromatic) SMILES of it with its number of aromatic atoms.
# Needs Debian's python3-rdkit; the tests themselves do not.
#   /usr/bin/python3 rdkit_reference.py < sample.csv > sample_rdkit.tsv
import sys

from rdkit import Chem, RDLogger, rdBase
from rdkit.Chem.rdMolDescriptors import CalcMolFormula

RDLogger.DisableLog("rdApp.*")
print(f"# RDKit {rdBase.rdkitVersion} (Debian python3-rdkit) on the SMILES of sample.csv (written by rdkit_reference.py)")
print("# smiles\theavy_atoms\tbonds\tformula\taromatic_atoms\trdkit_aromatic_smiles "
      "(aromatic_atoms and rdkit_aromatic_smiles empty: RDKit cannot sanitize it)")
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line or line.startswith("#"):
        continue
    smi = line.split(",")[0]
    m = Chem.MolFromSmiles(smi)
    arom, asmi = "", ""
    if m is None:  # not valid for RDKit's valence model: count it unsanitized
        m = Chem.MolFromSmiles(smi, sanitize=False)
        m.UpdatePropertyCache(strict=False)
    else:
        arom = str(sum(1 for a in m.GetAtoms() if a.GetIsAromatic()))
        asmi = Chem.MolToSmiles(m)
    print("\t".join([smi, str(m.GetNumHeavyAtoms()), str(m.GetNumBonds()), CalcMolFormula(m), arom, asmi]))
